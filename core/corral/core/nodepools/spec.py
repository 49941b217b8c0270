"""A node pool's fields (spec 2.5) as a request gives them, checked before anything is written.

Bounds: `quantity` 0 to MAX_QUANTITY (a pool of 0 keeps its settings and no machine);
`deleteNotReadyAfterSecs` 0 (never) to Rancher's own maximum, a year; the hostname prefix
leaves room for a number of MAX_NUMBER_DIGITS digits in a DNS label.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from corral.core.api.ids import MAX_LABEL
from corral.core.api.labels import user_annotations, user_labels
from corral.core.errors import Invalid

MAX_QUANTITY = 1000
MAX_NOT_READY_SECS = 31_540_000
MAX_NUMBER_DIGITS = 5
MAX_PREFIX = MAX_LABEL - MAX_NUMBER_DIGITS
ROLES = ("etcd", "controlPlane", "worker")
# A DNS label short of its end: the number appended makes it end with a digit.
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*)?", re.ASCII)


def hostname_prefix(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("hostnamePrefix is required", "hostnamePrefix", "MissingRequired")
    if len(value) > MAX_PREFIX or not _PREFIX.fullmatch(value):
        raise Invalid(
            f"hostnamePrefix must be at most {MAX_PREFIX} lower-case letters, digits or '-', "
            "starting with a letter or digit (a number is appended to make each hostname)",
            "hostnamePrefix",
        )
    return value


def bounded_int(value: Any, field: str, maximum: int) -> int:
    # bool is an int in Python; `true` is not a number in JSON.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise Invalid(f"{field} must be a whole number from 0 to {maximum}", field)
    return value


def quantity(value: Any) -> int:
    return bounded_int(value, "quantity", MAX_QUANTITY)


def not_ready_secs(value: Any) -> int:
    return bounded_int(value, "deleteNotReadyAfterSecs", MAX_NOT_READY_SECS)


def flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{field} must be true or false", field)
    return value


def node_labels(value: Any) -> dict[str, str]:
    return _renamed(user_labels, value, "labels", "nodeLabels")


def node_annotations(value: Any) -> dict[str, str]:
    return _renamed(user_annotations, value, "annotations", "nodeAnnotations")


def _renamed(
    check: Callable[[Any], dict[str, str]], value: Any, checked: str, field: str
) -> dict[str, str]:
    """Kubernetes' label and annotation rules (corral's own keys refused), with the error
    naming the pool's field rather than the one `check` knows."""
    try:
        return check(value)
    except Invalid as exc:
        raise Invalid(exc.message.replace(checked, field, 1), field) from None
