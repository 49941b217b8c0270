"""What readers derive from caches, kept while what it was derived from stands: a project's
workloads in id order cost their sort once per workload created or deleted in the cluster,
not once per request."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Values kept, the most recently used: a project deleted is forgotten in time.
MAX_KEPT = 1024


class Derived(Generic[K, V]):
    def __init__(self, size: int = MAX_KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[K, tuple[Hashable, V]] = OrderedDict()

    def last(self, key: K) -> V | None:
        """The value last derived for `key`, whatever it was derived under: for a `derive`
        that reuses what has not changed since."""
        found = self._kept.get(key)
        return None if found is None else found[1]

    def get(self, key: K, stamp: Hashable, derive: Callable[[], V]) -> V:
        """The value of `key`, derived again when its `stamp` is not the one it was derived
        under: the caches it reads and their versions (caches compare by identity, so a
        cluster connected again, which starts new ones, derives again)."""
        found = self._kept.get(key)
        if found is None or found[0] != stamp:
            found = self._kept[key] = (stamp, derive())
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return found[1]
