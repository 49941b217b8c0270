"""The informer: a listing replaces what it holds, change hooks see what changed, and this
process's own writes never overwrite something newer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from lightkube.resources.core_v1 import Namespace

from corral.core.kube.informer import Informer


def namespace(name: str, version: str, project: str = "") -> dict[str, Any]:
    annotations = {"field.svc.io/projectId": project} if project else {}
    return {"metadata": {"name": name, "resourceVersion": version, "annotations": annotations}}


class Listing:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.resourceVersion = "100"

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        for item in self.items:
            yield item


class Client:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def list(self, resource: Any, **scope: Any) -> Listing:
        return Listing(self.items)


def by_project(obj: dict[str, Any]) -> list[str]:
    project = obj["metadata"]["annotations"].get("field.svc.io/projectId")
    return [project] if project else []


async def test_a_listing_replaces_the_contents_and_reports_each_change() -> None:
    client, events = Client(), []
    informer = Informer(
        client,  # type: ignore[arg-type]
        Namespace,
        {"project": by_project},
        on_change=lambda event, obj: events.append((event, obj["metadata"]["name"])),
    )
    client.items = [namespace("a", "1", "c:p"), namespace("b", "1")]
    await informer.relist()
    assert events == [("ADDED", "a"), ("ADDED", "b")]
    assert [o["metadata"]["name"] for o in informer.by_index("project", "c:p")] == ["a"]
    version = informer.version
    events.clear()
    client.items = [namespace("b", "1"), namespace("c", "2", "c:p")]
    await informer.relist()
    assert events == [("DELETED", "a"), ("ADDED", "c")]
    assert informer.get("a") is None and informer.version > version
    assert [o["metadata"]["name"] for o in informer.by_index("project", "c:p")] == ["c"]


def test_own_writes_go_in_unless_something_newer_is_there() -> None:
    informer = Informer(None, Namespace)  # type: ignore[arg-type]
    informer.put(namespace("a", "5", "c:p"))
    informer.put(namespace("a", "4"))
    assert informer.get("a") == namespace("a", "5", "c:p")
    informer.put(namespace("a", "6"))
    assert informer.get("a") == namespace("a", "6")
    informer.forget("a")
    assert len(informer) == 0


class Watching(Client):
    """A client whose watch brings these events, then stays open."""

    def __init__(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__()
        self.events = events
        self.drained = asyncio.Event()  # the informer has taken in every event

    async def watch(self, resource: Any, **scope: Any) -> AsyncIterator[tuple[str, Any]]:
        for event in self.events:
            yield event
        self.drained.set()
        await asyncio.Event().wait()


def without_annotations(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {k: v for k, v in obj["metadata"].items() if k != "annotations"}}


async def test_a_cut_copy_changes_only_when_what_it_keeps_does() -> None:
    labelled = namespace("a", "3")
    labelled["metadata"]["labels"] = {"team": "x"}
    client = Watching([("MODIFIED", namespace("a", "2", "c:p")), ("MODIFIED", labelled)])
    client.items = [namespace("a", "1")]
    events: list[tuple[str, str]] = []
    informer = Informer(
        client,  # type: ignore[arg-type]
        Namespace,
        keep=without_annotations,
        on_change=lambda event, obj: events.append((event, obj["metadata"]["resourceVersion"])),
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(client.drained.wait(), 5)
    finally:
        task.cancel()
    # The annotation-only update (version 2) is taken in silence; the label's is a change.
    assert events == [("ADDED", "1"), ("MODIFIED", "3")]
    assert informer.get("a") == without_annotations(labelled)


async def test_a_cut_copy_taken_in_silence_still_moves_its_version() -> None:
    client = Watching([("MODIFIED", namespace("a", "2", "c:p"))])
    client.items = [namespace("a", "1")]
    informer = Informer(client, Namespace, keep=without_annotations)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(client.drained.wait(), 5)
    finally:
        task.cancel()
    informer.put(namespace("a", "1"))  # an older write of this process's
    assert informer.get("a") == without_annotations(namespace("a", "2"))


def test_alike_objects_share_their_strings_and_stay_equal() -> None:
    informer = Informer(None, Namespace, share_strings=True)  # type: ignore[arg-type]
    first, second = namespace("a", "1", "c:p"), namespace("b", "1", "c:p")
    # Built at run time, as a JSON decoder builds them: equal, but not one object.
    first["metadata"]["labels"] = {"team": "".join(["x", "y"])}
    second["metadata"]["labels"] = {"team": "".join(["x", "y"])}
    assert first["metadata"]["labels"]["team"] is not second["metadata"]["labels"]["team"]
    informer.put(first)
    informer.put(second)
    a, b = informer.get("a"), informer.get("b")
    assert a == first and b == second
    assert a is not None and b is not None
    assert a["metadata"]["labels"]["team"] is b["metadata"]["labels"]["team"]
