"""A pool's hostnames, as Rancher's node pool controller names them (provisioning.md 3.2).

The prefix's trailing digits, if any, give the first number and its zero-padded width
(`worker01` → `worker01`, `worker02`); without them numbering starts at 1 (`worker` →
`worker1`). New machines take the lowest free numbers, so gaps fill first; scale-down removes
the highest hostnames in natural order (`w2 < w12`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

_TRAILING_DIGITS = re.compile(r"^(.*?)([0-9]+)$")
_CHUNKS = re.compile(r"([0-9]+)")


def parse_prefix(prefix: str) -> tuple[str, int, int]:
    """(stem, first number, minimum width) of a hostname prefix."""
    found = _TRAILING_DIGITS.match(prefix)
    if found is None:
        return prefix, 1, 1
    return found.group(1), int(found.group(2)), len(found.group(2))


def hostname(prefix: str, number: int) -> str:
    stem, _, width = parse_prefix(prefix)
    return f"{stem}{number:0{width}d}"


def new_hostnames(prefix: str, taken: Collection[str], count: int) -> list[str]:
    """`count` hostnames of the pool not in `taken`, lowest numbers first."""
    stem, number, width = parse_prefix(prefix)
    names: list[str] = []
    while len(names) < count:
        name = f"{stem}{number:0{width}d}"
        if name not in taken:
            names.append(name)
        number += 1
    return names


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Orders `abc2` before `abc12`: digit runs compare as numbers."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _CHUNKS.split(name) if part
    )


def highest(hostnames: Iterable[str], count: int) -> list[str]:
    """The `count` hostnames a scale-down removes: the highest in natural order, highest first."""
    if count <= 0:
        return []
    return sorted(hostnames, key=natural_key, reverse=True)[:count]
