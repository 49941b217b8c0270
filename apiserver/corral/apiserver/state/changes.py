"""The changes the caches see, handed to every open subscription (`GET /v3/subscribe`).

An informer's change hook publishes each change its watch brings; each subscriber has a queue
of its own, bounded: one that falls that far behind is dropped (`overflowed`), as Kubernetes
drops a slow watcher, and its client subscribes again and reads its lists afresh. Nothing here
knows who may see what: the subscription filters for its caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from corral.core.kube.informer import ChangeHook, Obj

# Changes one subscriber may have waiting: a thousand clusters changing at once fit.
QUEUE_LIMIT = 4096


@dataclass(frozen=True)
class Change:
    cache: str  # the informer's name: `clusters`, `workloads:deployment`
    event: str  # ADDED, MODIFIED or DELETED
    obj: Obj
    # The downstream cluster whose informer saw it; empty for the management cluster's.
    cluster: str = ""


@dataclass(eq=False)  # each one is itself: kept in a set by identity
class Subscriber:
    queue: asyncio.Queue[Change] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))
    # Set when a change found the queue full: the subscription ends, and nothing after the
    # lost change is delivered, so no client believes a list it missed a change of.
    overflowed: asyncio.Event = field(default_factory=asyncio.Event)


class Changes:
    def __init__(self) -> None:
        self._subscribers: set[Subscriber] = set()

    def hook(self, cache: str, cluster: str = "") -> ChangeHook:
        """The change hook of the informer named `cache` (of the downstream `cluster`)."""
        return lambda event, obj: self.publish(Change(cache, event, obj, cluster))

    def publish(self, change: Change) -> None:
        for subscriber in self._subscribers:
            if subscriber.overflowed.is_set():
                continue
            try:
                subscriber.queue.put_nowait(change)
            except asyncio.QueueFull:
                subscriber.overflowed.set()

    @contextmanager
    def subscribe(self) -> Iterator[Subscriber]:
        subscriber = Subscriber()
        self._subscribers.add(subscriber)
        try:
            yield subscriber
        finally:
            self._subscribers.discard(subscriber)

    def __len__(self) -> int:
        return len(self._subscribers)
