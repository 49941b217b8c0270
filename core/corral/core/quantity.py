"""Kubernetes quantities (`500m`, `256Mi`, `2Gi`, `4`): parsing, summing, printing."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}  # fmt: skip
_PATTERN = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|)$")


class QuantityError(ValueError):
    pass


def parse(text: str) -> Decimal:
    match = _PATTERN.match(str(text).strip())
    if not match:
        raise QuantityError(f"not a quantity: {text!r} (examples: 500m, 256Mi, 2Gi, 4)")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise QuantityError(f"not a quantity: {text!r}") from None
    suffix = match.group(2)
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def parse_bytes(text: str) -> int:
    """A whole number of bytes (`1Mi` -> 1048576)."""
    value = parse(text)
    if value != value.to_integral_value() or value < 0:
        raise QuantityError(f"not a byte size: {text!r}")
    return int(value)


def format_quantity(value: Decimal, resource: str) -> str:
    """CPU in cores or millicores; memory and storage in the largest exact binary unit."""
    if resource == "cpu" or value != value.to_integral_value():
        millis = (value * 1000).to_integral_value()
        return f"{int(millis)}m" if millis % 1000 else str(int(millis // 1000))
    whole = int(value)
    if resource in ("memory", "ephemeral-storage", "storage") or resource.startswith("hugepages"):
        for suffix, size in reversed(_BINARY.items()):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


def add(lists: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The sum of resource lists, per resource name."""
    totals: dict[str, Decimal] = {}
    for resources in lists:
        for name, text in resources.items():
            totals[name] = totals.get(name, Decimal(0)) + parse(text)
    return {name: format_quantity(total, name) for name, total in sorted(totals.items())}
