"""What readers derive from caches, kept until one of those caches changes: a project's
workloads in id order costs its sort once per change of the cluster's workloads, not once
per request."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from corral.core.kube.informer import Informer

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Values kept, the most recently used: a project deleted is forgotten in time.
MAX_KEPT = 1024


class Derived(Generic[K, V]):
    def __init__(self, size: int = MAX_KEPT) -> None:
        self._size = size
        # Each value with the caches it came from and their versions then.
        self._kept: OrderedDict[K, tuple[tuple[Informer, ...], tuple[int, ...], V]] = OrderedDict()

    def get(self, key: K, sources: Sequence[Informer], derive: Callable[[], V]) -> V:
        """The value of `key`, derived again when any of `sources` moved since (or is
        another cache than it came from: a cluster connected again starts new ones)."""
        caches, versions = tuple(sources), tuple(s.version for s in sources)
        found = self._kept.get(key)
        if (
            found is not None
            and found[1] == versions
            and all(a is b for a, b in zip(found[0], caches, strict=True))
        ):
            self._kept.move_to_end(key)
            return found[2]
        value = derive()
        self._kept[key] = (caches, versions, value)
        self._kept.move_to_end(key)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return value
