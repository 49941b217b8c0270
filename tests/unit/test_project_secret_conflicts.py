"""The copies of project secrets held back by a Secret of someone else's: which of those
Secrets the agent watches by name, and when one of them is gone."""

from __future__ import annotations

import asyncio
from typing import Any

from corral.core.projects.downstream import Key
from corral.operator.downstream import projects
from corral.operator.state import State


class Listed:
    """What `released` reads of an informer: whether it has listed, and what it holds."""

    def __init__(self, *objects: dict[str, Any], synced: bool = True) -> None:
        self.synced = asyncio.Event()
        if synced:
            self.synced.set()
        self.objects = list(objects)

    def all(self) -> list[dict[str, Any]]:
        return self.objects


def key(namespace: str, name: str = "shared") -> Key:
    return ("Secret", namespace, name)


def sync() -> projects.ProjectSync:
    return projects.ProjectSync("c-abc", State(None, lambda: None), None)  # type: ignore[arg-type]


def test_the_first_conflicts_in_key_order_are_watched_each_by_its_name() -> None:
    subject = sync()
    subject.conflicts = {key(f"ns-{i:02}") for i in range(projects.MAX_HELD + 4)}

    held = subject.held()

    assert len(held) == projects.MAX_HELD
    assert list(held.values()) == sorted(subject.conflicts)[: projects.MAX_HELD]
    assert held["held secret ns-00/shared"] == key("ns-00")
    assert all(name.startswith(projects.HELD) for name in held)


def test_a_copy_is_released_once_its_watch_has_listed_and_found_nothing() -> None:
    theirs = {"metadata": {"name": "shared", "namespace": "a"}}
    conflicts = {key("a"), key("b"), key("c")}
    held = {
        key("a"): Listed(theirs),  # still there
        key("b"): Listed(),  # gone
        key("c"): Listed(synced=False),  # not listed yet: unknown
        key("d"): Listed(),  # no longer held back
    }

    assert projects.released(conflicts, held) == {key("b")}  # type: ignore[arg-type]


def test_a_released_copy_is_tried_at_once_and_then_only_when_the_retry_is_due() -> None:
    conflicts = {key("a"), key("b")}
    retry = projects.retry_conflicts

    assert retry(conflicts, due=False, now={key("a")}, before=set())
    assert not retry(conflicts, due=False, now={key("a")}, before={key("a")})
    assert retry(conflicts, due=False, now={key("a"), key("b")}, before={key("a")})
    assert not retry(conflicts, due=False, now=set(), before={key("a")})
    assert retry(conflicts, due=True, now={key("a")}, before={key("a")})
    assert not retry(set(), due=True, now=set(), before=set())
