"""Resources rendered once per version of their object: a user's hundred tokens listed again
are looked up, not rendered again (`Family.rendering_key`); and a resource's answer encoded
once per version and what varies of it, so a GET of an unchanged token encodes nothing.

Each family keeps its own: a project's 10,000 workloads paged through never evict the tokens
users list, nor the other way round."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

R = TypeVar("R", dict[str, Any], bytes)

# Renderings and encoded answers kept per family, the most recently used: a token's about a
# kilobyte, a workload's about two (its containers, scheduling and links), so the two families
# that keep them hold at most about 30 MiB between them.
MAX_KEPT = 10_000


class Renderings:
    def __init__(self, size: int = MAX_KEPT) -> None:
        self._size = size
        self._kept: dict[str, OrderedDict[Hashable, Any]] = {}

    def get(self, family: str, key: Hashable, render: Callable[[], R]) -> R:
        """The rendering `family` keeps under `key`, or `render()`'s, kept from now on. It is
        shared: the caller copies before changing it."""
        kept = self._kept.get(family)
        if kept is None:
            kept = self._kept[family] = OrderedDict()
        found: R | None = kept.get(key)
        if found is None:
            found = kept[key] = render()
            while len(kept) > self._size:
                kept.popitem(last=False)
        kept.move_to_end(key)
        return found
