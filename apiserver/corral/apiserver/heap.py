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
"""

from __future__ import annotations

import asyncio
import gc
import itertools

PERIOD = 60.0
THAWED_EVERY = 60


def settle(thaw: bool = True) -> None:
    """Collect (everything when `thaw`, else what is not frozen yet), then freeze the rest."""
    if thaw:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


async def keep_settled(period: float = PERIOD) -> None:
    """Settle the heap every `period` seconds, thawed every `THAWED_EVERY`th time. Runs until
    cancelled."""
    for count in itertools.count(1):
        await asyncio.sleep(period)
        settle(thaw=count % THAWED_EVERY == 0)
