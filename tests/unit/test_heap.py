"""The API server's heap: frozen out of automatic collections, collected when settled."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import Iterator

import pytest

from corral.apiserver import heap


class Node:
    """An object that can be part of a reference cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()


def test_what_is_alive_when_settled_is_frozen_out_of_collections() -> None:
    kept = {"cache": [Node() for _ in range(10)]}
    heap.settle()
    assert gc.get_freeze_count() > 0
    # The generations collections walk no longer hold it.
    assert not any(o is kept for o in gc.get_objects())


def test_cyclic_garbage_frozen_in_use_goes_at_the_next_thawed_settle() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a
    watched = weakref.ref(a)
    heap.settle()  # the cycle, in use, is frozen with the rest
    del a, b  # now garbage that only a collection of frozen objects finds
    gc.collect()
    assert watched() is not None
    heap.settle(thaw=False)
    assert watched() is not None  # frozen, it waits for a thawed settle
    heap.settle()
    assert watched() is None


def test_a_settle_without_thawing_collects_what_came_since_the_last() -> None:
    heap.settle()
    a, b = Node(), Node()
    a.other, b.other = b, a
    watched = weakref.ref(a)
    del a, b
    heap.settle(thaw=False)
    assert watched() is None


def test_an_acyclic_frozen_object_is_freed_when_its_last_reference_goes() -> None:
    kept = [Node()]
    watched = weakref.ref(kept[0])
    heap.settle()
    kept.clear()
    assert watched() is None


async def test_while_kept_settled_a_full_collection_walks_nothing_a_settle_still_collects() -> None:
    keeping = asyncio.create_task(heap.keep_settled(period=3600))
    await asyncio.sleep(0)  # the callback is in place
    try:
        came = [{"workload": [n]} for n in range(10_000)]
        frozen = gc.get_freeze_count()
        gc.collect()  # as an automatic full collection would start
        assert gc.get_freeze_count() >= frozen + len(came)
        assert not any(o is came for o in gc.get_objects())
        a, b = Node(), Node()
        a.other, b.other = b, a
        watched = weakref.ref(a)
        del a, b
        heap.settle(thaw=False)  # a settle's own collection is not frozen away
        assert watched() is None
    finally:
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping
    assert heap._freeze_before_full not in gc.callbacks
