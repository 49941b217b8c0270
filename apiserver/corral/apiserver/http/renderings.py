"""Resources rendered once per version of their object: a user's hundred tokens listed again
are looked up, not rendered again (`Family.rendering_key`); and a resource's answer encoded
once per version and what varies of it, so a GET of an unchanged token encodes nothing."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

R = TypeVar("R", dict[str, Any], bytes)

# Renderings and encoded answers kept, the most recently used: about a kilobyte each.
MAX_KEPT = 10_000


class Renderings:
    def __init__(self, size: int = MAX_KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, render: Callable[[], R]) -> R:
        """The rendering kept under `key`, or `render()`'s, kept from now on. It is shared:
        the caller copies before changing it."""
        found: R | None = self._kept.get(key)
        if found is None:
            found = self._kept[key] = render()
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
        self._kept.move_to_end(key)
        return found
