"""The informer: a listing replaces what it holds, change hooks see what changed, and this
process's own writes never overwrite something newer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from lightkube import ApiError
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


async def test_a_value_is_touched_when_one_of_its_objects_comes_changes_moves_or_goes() -> None:
    """`touched` moves for a project whose namespace came, changed, moved away or went, not
    for another project's; a project nothing is in reads -1, and a value's versions only
    grow, so a reader's stamp taken before never matches one after."""
    client = Client()
    informer = Informer(client, Namespace, {"project": by_project}, versioned=("project",))  # type: ignore[arg-type]
    assert informer.touched("project", "c:p") == -1
    informer.put(namespace("a", "1", "c:p"))
    first = informer.touched("project", "c:p")
    assert first >= 0
    informer.put(namespace("b", "1", "c:q"))
    assert informer.touched("project", "c:p") == first
    informer.put(namespace("a", "2", "c:p"))
    changed = informer.touched("project", "c:p")
    assert changed > first
    informer.put(namespace("a", "3", "c:q"))  # moved to another project
    assert informer.touched("project", "c:p") == -1
    moved = informer.touched("project", "c:q")
    assert moved > changed
    client.items = [namespace("a", "3", "c:q"), namespace("c", "1", "c:p")]
    await informer.relist()  # b went, c came
    assert informer.touched("project", "c:q") > moved
    assert informer.touched("project", "c:p") > moved


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


async def test_every_listing_is_told_even_one_that_found_nothing() -> None:
    # An empty listing changes nothing, yet a reader waiting for an object to be gone learns
    # from it that it is.
    client, listed = Watching([]), []
    informer = Informer(client, Namespace, on_synced=lambda: listed.append(informer.all()))  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(client.drained.wait(), 5)
    finally:
        task.cancel()
    assert listed == [[]]


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


async def test_a_write_answered_before_a_deletion_the_watch_brought_stays_gone() -> None:
    """A DELETE's answer (the object with its finalizers still on, version 5) handled after the
    watch's DELETED (version 6) leaves the object gone; the same name made again (version 7)
    is taken. The same holds after this process's own `forget` and after a listing."""
    client = Watching([("ADDED", namespace("a", "5")), ("DELETED", namespace("a", "6"))])
    informer = Informer(client, Namespace)  # type: ignore[arg-type]
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(client.drained.wait(), 5)
    finally:
        task.cancel()
    informer.put(namespace("a", "5"))
    assert informer.get("a") is None
    informer.put(namespace("a", "7"))
    assert informer.get("a") == namespace("a", "7")

    informer.forget("a")
    informer.put(namespace("a", "7"))
    assert informer.get("a") is None

    client.items = [namespace("b", "8")]
    informer.put(namespace("c", "8"))
    await informer.relist()  # at version 100: c is not there
    informer.put(namespace("c", "8"))
    assert informer.get("c") is None
    informer.put(namespace("c", "101"))
    assert informer.get("c") == namespace("c", "101")


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


class Live:
    """A management cluster holding `objects`, read one by one."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.reads: list[tuple[str, str | None]] = []

    async def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        self.reads.append((name, namespace))
        if name not in self.objects:

            class Missing:
                status_code = 404

                def json(self) -> dict[str, Any]:
                    return {"code": 404, "message": "not found", "reason": "NotFound"}

            raise ApiError(response=Missing())  # type: ignore[arg-type]
        return self.objects[name]


async def test_a_miss_is_read_live_and_kept_with_its_indexes() -> None:
    live = Live({"a": namespace("a", "7", "c:p")})
    informer = Informer(live, Namespace, {"project": by_project})  # type: ignore[arg-type]
    assert await informer.read_through("a") == namespace("a", "7", "c:p")
    assert [o["metadata"]["name"] for o in informer.by_index("project", "c:p")] == ["a"]
    assert await informer.read_through("gone") is None and informer.get("gone") is None
    assert await informer.read_through("a") is not None
    assert live.reads == [("a", None), ("gone", None)]


async def test_a_namespaced_key_is_read_in_its_namespace() -> None:
    live = Live({"p-1": {"metadata": {"name": "p-1", "namespace": "c-1", "resourceVersion": "3"}}})
    informer = Informer(live, Namespace)  # type: ignore[arg-type]
    assert await informer.read_through("c-1/p-1") is not None
    assert live.reads == [("p-1", "c-1")] and informer.get("c-1/p-1") is not None


async def test_a_reader_waiting_for_a_change_wakes_on_it_and_misses_none_made_before() -> None:
    client = Client()
    informer = Informer(client, Namespace)  # type: ignore[arg-type]
    since = informer.version
    waiting = asyncio.create_task(informer.changed(since))
    await asyncio.sleep(0)
    assert not waiting.done()
    informer.put(namespace("a", "1"))
    assert await asyncio.wait_for(waiting, 1) == informer.version != since
    # A change made while the reader was busy elsewhere: it is not waited for again.
    informer.put(namespace("b", "1"))
    assert await asyncio.wait_for(informer.changed(since), 1) == informer.version
