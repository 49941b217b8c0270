"""Node taints, validated as Kubernetes validates them (`ValidateTaint` and
`ValidateNodeSpec`), so that nothing a client asks for is refused later by the cluster.

A key is a qualified name (an optional DNS subdomain prefix of at most 253 characters and a
`/`, then a name of at most 63 alphanumerics with `-`, `_` or `.` inside), a value a label
value (empty or like the name part), an effect one of three; a node's taints are unique by
key and effect.
"""

from __future__ import annotations

from typing import Any

from corral.core.api.labels import NAME_RULE, is_name, key_problem
from corral.core.errors import UNKNOWN_FIELD, Invalid

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_TAINTS = 64


class InvalidTaint(Invalid):
    """A taint Kubernetes would refuse; the message says which and why."""


def parse(value: Any, field: str = "desiredNodeTaints") -> list[dict[str, str]]:
    """The taints of a request body or a stored spec, in canonical form (`value` only when
    not empty); raises InvalidTaint."""
    if not isinstance(value, list):
        raise InvalidTaint(f"{field} must be a list of taints", field)
    if len(value) > MAX_TAINTS:
        raise InvalidTaint(f"{field} has more than {MAX_TAINTS} taints", field)
    result: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(value):
        entry = _taint(taint, field, f"{field}[{index}]")
        if (entry["key"], entry["effect"]) in seen:
            raise InvalidTaint(f"{field}[{index}]: taints must be unique by key and effect", field)
        seen.add((entry["key"], entry["effect"]))
        result.append(entry)
    return result


def _taint(taint: Any, field: str, where: str) -> dict[str, str]:
    if not isinstance(taint, dict):
        raise InvalidTaint(f"{where} must be an object with key, value and effect", field)
    for name in taint:
        # `type` is the name Rancher's clients give an embedded object ("taint"): ignored.
        if name not in ("key", "value", "effect", "type"):
            # Named by its path, as any unknown key of a body is; still a taint's refusal.
            at = f"{where}.{name}"
            raise InvalidTaint(f"{at} is not a field of a taint", at, UNKNOWN_FIELD)
    key, value, effect = taint.get("key"), taint.get("value"), taint.get("effect")
    if not isinstance(key, str) or not key:
        raise InvalidTaint(f"{where}.key is required and must be text", field)
    if problem := key_problem(key):
        raise InvalidTaint(f"{where}.key: {problem}", field)
    if value is not None and not isinstance(value, str):
        raise InvalidTaint(f"{where}.value must be text", field)
    if value and not is_name(value):
        raise InvalidTaint(f"{where}.value must be empty or {NAME_RULE}", field)
    if effect not in EFFECTS:
        raise InvalidTaint(f"{where}.effect must be one of {', '.join(EFFECTS)}", field)
    entry = {"key": key, "effect": str(effect)}
    if value:
        entry["value"] = value
    return entry
