"""Byte sizes in Kubernetes notation (`1Mi`, `512Ki`, `2G`, `1000`)."""

from __future__ import annotations

import re

_SUFFIXES = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
}  # fmt: skip
_PATTERN = re.compile(r"^(\d+)(|k|M|G|T|Ki|Mi|Gi|Ti)$")


def parse_bytes(text: str) -> int:
    match = _PATTERN.match(text.strip())
    if not match:
        raise ValueError(f"not a byte size: {text!r} (examples: 1Mi, 512Ki, 1000)")
    return int(match.group(1)) * _SUFFIXES[match.group(2)]
