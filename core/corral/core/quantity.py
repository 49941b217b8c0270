"""Kubernetes quantities (`500m`, `256Mi`, `2Gi`, `4`, `1e3`): parsing, summing, printing.

The grammar is Kubernetes' own (k8s.io/apimachinery/pkg/api/resource, `ParseQuantity`):

    <quantity> ::= <sign>? <number> <suffix>
    <number>   ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>   ::= "" | n | u | m | k | M | G | T | P | E          (powers of 1000)
                 | Ki | Mi | Gi | Ti | Pi | Ei                      (powers of 1024)
                 | (e | E) <sign>? <digits>                         (a power of ten)

As in Kubernetes, a value that is not a whole number of nano-units is rounded away from zero to
the next one (`0.1n` is `1n`, `1e-30` is `1n`). Kubernetes caps binary values at 2^63-1 and
keeps decimal ones of any size; here every value beyond 2^63-1 in magnitude is refused
(`saturate=True`, for values Kubernetes or someone else already stored, caps it instead).

Every bound is checked on the text, before any arithmetic: at most `MAX_LENGTH` characters,
and an exponent beyond `MAX_EXPONENT` decides the outcome without being applied. So no input
makes parsing expensive, and nothing unbounded ever reaches `int()` or `str()`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from decimal import ROUND_UP, Context, Decimal, localcontext
from typing import Any

from corral.core.errors import Invalid

log = logging.getLogger(__name__)

# The CRDs hold quantities of at most 64 characters.
MAX_LENGTH = 64
MAX_VALUE = Decimal(2**63 - 1)
# With at most 64 digits, a power of ten beyond this makes any value other than zero either
# larger than MAX_VALUE or smaller than one nano-unit.
MAX_EXPONENT = 100
NANO = Decimal("1e-9")
# Larger than any sum this service prints (counts of MAX_VALUE-sized values).
PRINTABLE = Decimal(10) ** 40

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_PATTERN = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
# Exact for every value that passes the bounds: 64 digits times 2^60 (19 digits), or values
# up to PRINTABLE with nine decimals.
_EXACT = Context(prec=120, Emax=999, Emin=-999, rounding=ROUND_UP)


class QuantityError(Invalid):
    pass


def parse(text: str, saturate: bool = False) -> Decimal:
    """The value of a quantity, a multiple of 1n.

    Refuses what Kubernetes refuses and what exceeds the bounds above; with `saturate`, a
    value too large in magnitude is capped at MAX_VALUE instead of refused."""
    if not isinstance(text, str) or not text:
        raise QuantityError("a quantity is a non-empty string (examples: 500m, 256Mi, 2Gi, 4)")
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"a quantity has at most {MAX_LENGTH} characters")
    match = _PATTERN.fullmatch(text)
    if match is None or not (match["whole"] or match["fraction"]):
        raise QuantityError(f"not a quantity: {text!r} (examples: 500m, 256Mi, 2Gi, 4, 1e3)")
    fraction = f".{match['fraction']}" if match["fraction"] else ""
    digits = Decimal(f"{match['whole'] or 0}{fraction}")
    suffix = match["suffix"] or ""
    with localcontext(_EXACT):
        if suffix in _BINARY:
            value = digits * (1 << _BINARY[suffix])
        else:
            power = _DECIMAL[suffix] if suffix in _DECIMAL else int(suffix[1:])
            if not digits:
                value = digits
            elif power < -MAX_EXPONENT:
                value = NANO  # below one nano-unit whatever the digits: rounded up
            elif power > MAX_EXPONENT:
                value = MAX_VALUE + 1  # beyond the bound whatever the digits
            else:
                value = digits.scaleb(power)
        if value > MAX_VALUE:
            if not saturate:
                raise QuantityError(f"{text!r} is larger than the largest quantity, 2^63-1")
            value = MAX_VALUE
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -9:
            value = value.quantize(NANO)
        return -value if match["sign"] == "-" else value


def amount(value: Any, field: str) -> str:
    """An amount of a resource a client gives (a capacity, request, limit or quota), the one
    rule every quantity field of every schema follows: a JSON string, or a number as JSON
    clients send them, of the grammar above, within its bounds (at most MAX_LENGTH characters,
    at most 2^63-1), and not negative. Its text is what is stored. Invalid naming `field`."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{field} must be a quantity such as 500m, 256Mi or 4", field)
    text = str(value)
    try:
        parsed = parse(text)
    except QuantityError as exc:
        raise QuantityError(f"{field}: {exc}", field) from None
    if parsed < 0:
        raise QuantityError(f"{field} cannot be negative", field)
    return text


def parse_bytes(text: str) -> int:
    """A whole number of bytes (`1Mi` -> 1048576)."""
    value = parse(text)
    if value != value.to_integral_value() or value < 0:
        raise QuantityError(f"not a byte size: {text!r}")
    return int(value)


def format_quantity(value: Decimal, resource: str) -> str:
    """CPU, and any value with a fraction, in the largest unit that keeps it exact (`2`,
    `1500m`, `250u`, `1n`); memory and storage in the largest exact binary unit."""
    if not value.is_finite() or abs(value) > PRINTABLE:
        raise QuantityError("the value is too large to print as a quantity")
    with localcontext(_EXACT):
        if resource == "cpu" or value != value.to_integral_value():
            for suffix, scale in (("", 1), ("m", 10**3), ("u", 10**6)):
                scaled = value * scale
                if scaled == scaled.to_integral_value():
                    return f"{int(scaled)}{suffix}"
            return f"{int((value * 10**9).to_integral_value())}n"
        whole = int(value)
    if resource in ("memory", "ephemeral-storage", "storage") or resource.startswith("hugepages"):
        for suffix, power in reversed(_BINARY.items()):
            if whole and whole % (1 << power) == 0:
                return f"{whole >> power}{suffix}"
    return str(whole)


def add(lists: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The sum of resource lists Kubernetes stored, per resource name. Kubernetes keeps
    quantities of any size and length: one beyond the bounds is capped, or left out (and
    logged) rather than failing the whole sum."""
    totals: dict[str, Decimal] = {}
    with localcontext(_EXACT):
        for resources in lists:
            for name, text in resources.items():
                try:
                    value = parse(text, saturate=True)
                except QuantityError as exc:
                    log.warning("%s left out of a sum: %s", name, exc)
                    continue
                totals[name] = totals.get(name, Decimal(0)) + value
    return {name: format_quantity(total, name) for name, total in sorted(totals.items())}
