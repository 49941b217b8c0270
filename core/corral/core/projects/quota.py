"""Project quotas: the `/v3` quota fields, their Kubernetes names, and the arithmetic that
decides whether a namespace, a move or a new limit fits.

A project's `resourceQuota.limit` caps the total over its namespaces; every namespace of the
project gets `namespaceDefaultResourceQuota.limit` as its own ResourceQuota. So a project with
`n` namespaces has `n x default` allotted, which must stay within the limit, and a limit may
not drop below what its namespaces already use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from corral.core import quantity

# /v3 field -> the ResourceQuota resource name it sets.
QUOTA_FIELDS = {
    "limitsCpu": "limits.cpu",
    "limitsMemory": "limits.memory",
    "requestsCpu": "requests.cpu",
    "requestsMemory": "requests.memory",
    "pods": "pods",
    "services": "services",
    "persistentVolumeClaims": "persistentvolumeclaims",
}
# containerDefaultResourceLimit field -> (LimitRange section, resource).
CONTAINER_DEFAULT_FIELDS = {
    "limitsCpu": ("default", "cpu"),
    "limitsMemory": ("default", "memory"),
    "requestsCpu": ("defaultRequest", "cpu"),
    "requestsMemory": ("defaultRequest", "memory"),
}


class QuotaError(ValueError):
    """Bad quota input: `field` names the /v3 field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Excess:
    """One resource over its limit, with the numbers that show it."""

    field: str
    wanted: Decimal
    limit: Decimal
    explanation: str

    def describe(self) -> str:
        return (
            f"{self.field}: {self.explanation} = {show(self.wanted, self.field)} "
            f"exceeds the limit {show(self.limit, self.field)}"
        )


def kind_of(field: str) -> str:
    """How a field's quantities print: cpu, memory or a plain count."""
    lowered = field.lower()
    return "cpu" if lowered.endswith("cpu") else "memory" if lowered.endswith("memory") else "n"


def show(value: Decimal, field: str) -> str:
    return quantity.format_quantity(value, kind_of(field))


def parse_limits(value: Any, field: str, allowed: Iterable[str] = QUOTA_FIELDS) -> dict[str, str]:
    """A `{field: quantity}` object, checked: known fields, valid non-negative quantities."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QuotaError(field, f"{field} must be an object")
    allowed = list(allowed)
    result = {}
    for name, text in value.items():
        if name not in allowed:
            raise QuotaError(
                f"{field}.{name}",
                f"{field}.{name} is not a quota field; known: {', '.join(allowed)}",
            )
        if text in (None, ""):
            continue
        try:
            parsed = quantity.parse(str(text))
        except quantity.QuantityError as exc:
            raise QuotaError(f"{field}.{name}", f"{field}.{name}: {exc}") from None
        if parsed < 0:
            raise QuotaError(f"{field}.{name}", f"{field}.{name} cannot be negative")
        result[name] = str(text)
    return result


def check_project_quota(limit: Mapping[str, str], default: Mapping[str, str]) -> None:
    """A project quota and its namespace default go together, over the same resources, and one
    namespace's default must fit in the project's limit."""
    if bool(limit) != bool(default):
        missing = "namespaceDefaultResourceQuota" if limit else "resourceQuota"
        raise QuotaError(
            f"{missing}.limit",
            "resourceQuota.limit and namespaceDefaultResourceQuota.limit are set together",
        )
    if set(limit) != set(default):
        differ = sorted(set(limit) ^ set(default))
        raise QuotaError(
            "namespaceDefaultResourceQuota.limit",
            f"the project limit and the namespace default must name the same resources; "
            f"only one names {', '.join(differ)}",
        )
    for excess in overcommit(limit, default, 1):
        raise QuotaError("namespaceDefaultResourceQuota.limit", excess.describe())


def overcommit(
    limit: Mapping[str, str], default: Mapping[str, str], namespaces: int
) -> list[Excess]:
    """What `namespaces` namespaces, each given `default`, would take beyond `limit`."""
    found = []
    for field, cap in sorted(limit.items()):
        if field not in default:
            continue
        each = quantity.parse(default[field])
        wanted = each * namespaces
        if wanted > quantity.parse(cap):
            found.append(
                Excess(
                    field,
                    wanted,
                    quantity.parse(cap),
                    f"{namespaces} namespace(s) x {show(each, field)}",
                )
            )
    return found


def below_use(limit: Mapping[str, str], used: Mapping[str, Decimal], what: str) -> list[Excess]:
    """Resources whose new `limit` is lower than what is `used` already."""
    return [
        Excess(field, used[field], quantity.parse(cap), f"{what} already uses")
        for field, cap in sorted(limit.items())
        if field in used and used[field] > quantity.parse(cap)
    ]


def resource_quota_hard(default: Mapping[str, str]) -> dict[str, str]:
    """The `spec.hard` of a namespace's ResourceQuota."""
    return {QUOTA_FIELDS[field]: value for field, value in sorted(default.items())}


def limit_range_limits(defaults: Mapping[str, str]) -> list[dict[str, Any]]:
    """The `spec.limits` of a namespace's LimitRange: container defaults."""
    entry: dict[str, Any] = {"type": "Container"}
    for field, value in sorted(defaults.items()):
        section, resource = CONTAINER_DEFAULT_FIELDS[field]
        entry.setdefault(section, {})[resource] = value
    return [entry]


def check_container_defaults(defaults: Mapping[str, str]) -> None:
    """A default request must not exceed the default limit of the same resource."""
    for resource in ("Cpu", "Memory"):
        request, cap = defaults.get(f"requests{resource}"), defaults.get(f"limits{resource}")
        if request and cap and quantity.parse(request) > quantity.parse(cap):
            raise QuotaError(
                f"containerDefaultResourceLimit.requests{resource}",
                f"requests{resource} {request} is more than limits{resource} {cap}",
            )


def usage(quotas: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Decimal]]:
    """`used` and `hard` per /v3 quota field, summed over ResourceQuota objects' status."""
    names = {v: k for k, v in QUOTA_FIELDS.items()}
    totals: dict[str, dict[str, Decimal]] = {"used": {}, "hard": {}}
    for quota in quotas:
        status = quota.get("status") or {}
        for part in ("used", "hard"):
            for resource, text in (status.get(part) or {}).items():
                if resource in names:
                    field = names[resource]
                    totals[part][field] = totals[part].get(field, Decimal(0)) + quantity.parse(text)
    return totals


def printable(values: Mapping[str, Decimal]) -> dict[str, str]:
    return {field: show(value, field) for field, value in sorted(values.items())}
