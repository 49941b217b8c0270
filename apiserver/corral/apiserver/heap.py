"""The cyclic garbage collector kept off the caches.

The API server holds what it serves in watch-fed caches: hundreds of thousands of containers
(100,000 tokens, a cluster's 10,000 workloads) that live as long as the process and hold no
reference cycles. Python's automatic collections walk all of them whenever enough objects
have been promoted since the last full one, and each answer under construction promotes
thousands: with 10,000 workloads cached, the collector took as much of the server's time as
making the pages under `make bench BENCH=many` (py-spy: 28 % of the samples each), and each
full collection was some request's wait.

So the long-lived heap is frozen (`gc.freeze`: automatic collections skip it, and each of its
objects is still freed the moment its last reference goes) and, once every `PERIOD`, thawed,
collected in full (cyclic garbage frozen meanwhile included) and frozen again: one full
collection per period rather than several a second.
"""

from __future__ import annotations

import asyncio
import gc

PERIOD = 60.0


def settle() -> None:
    """Collect everything, then freeze what is left."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


async def keep_settled(period: float = PERIOD) -> None:
    """Settle the heap every `period` seconds. Runs until cancelled."""
    while True:
        await asyncio.sleep(period)
        settle()
