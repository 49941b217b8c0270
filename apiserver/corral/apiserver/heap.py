"""The cyclic garbage collector kept off the caches.

The API server holds what it serves in watch-fed caches: hundreds of thousands of containers
(100,000 tokens, a cluster's 10,000 workloads) that live as long as the process and hold no
reference cycles. Python's automatic collections walk all of them whenever enough objects
have been promoted since the last full one, and each answer under construction promotes
thousands: with 10,000 workloads cached, the collector took as much of the server's time as
making the pages under `make bench BENCH=many` (py-spy: 28 % of the samples each), and each
full collection was some request's wait.

So the long-lived heap is frozen (`gc.freeze`: automatic collections skip it, and each of its
objects is still freed the moment its last reference goes). Every `PERIOD` what came since is
collected and frozen in turn, which walks only that; once every `THAWED_EVERY` periods the
whole heap is thawed and collected (cyclic garbage of objects frozen while in use, a request
then in flight, goes only then). A thawed collection of 100,000 cached tokens and 10,000
workloads took seconds of a loaded machine's time (py-spy), so it is kept rare.

Between settles an automatic full collection still walked everything that came since the last
(10,000 workloads a downstream cluster's watch had just brought: 235 ms, one page's wait).
While the heap is kept settled, such a collection finds it frozen instead: what survived the
young generations' collections, where short-lived cycles go, is frozen as the collection
starts (a constant-time move), and cyclic garbage among it waits for the next thawed settle.
"""

from __future__ import annotations

import asyncio
import gc
import itertools

PERIOD = 60.0
THAWED_EVERY = 60


class _State:
    settling = False


def settle(thaw: bool = True) -> None:
    """Collect (everything when `thaw`, else what is not frozen yet), then freeze the rest."""
    _State.settling = True
    try:
        if thaw:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
    finally:
        _State.settling = False


def _freeze_before_full(phase: str, info: dict[str, int]) -> None:
    """A full collection other than a settle's starts with nothing to walk."""
    if phase == "start" and info["generation"] == 2 and not _State.settling:
        gc.freeze()


async def keep_settled(period: float = PERIOD) -> None:
    """Settle the heap every `period` seconds, thawed every `THAWED_EVERY`th time, and keep
    other full collections off it meanwhile. Runs until cancelled."""
    gc.callbacks.append(_freeze_before_full)
    try:
        for count in itertools.count(1):
            await asyncio.sleep(period)
            settle(thaw=count % THAWED_EVERY == 0)
    finally:
        gc.callbacks.remove(_freeze_before_full)
