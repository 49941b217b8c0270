"""Project quotas: the `/v3` quota fields, their Kubernetes names, and the arithmetic that
decides whether a namespace, a move or a new limit fits.

A project's `resourceQuota.limit` caps the total over its namespaces; every namespace of the
project gets `namespaceDefaultResourceQuota.limit` as its own ResourceQuota. So a project with
`n` namespaces has `n x default` allotted, which must stay within the limit, and a limit may
not drop below what its namespaces already use.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from corral.core import quantity
from corral.core.errors import UNKNOWN_FIELD, Invalid, unknown

log = logging.getLogger(__name__)

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


# A cluster's defaults for the projects that set none of their own: each namespace of such a
# project gets the first as its ResourceQuota and the second as its LimitRange, so a project
# nobody gave a quota still holds only what the cluster's administrators allow.
CLUSTER_NAMESPACE_QUOTA = "defaultProjectNamespaceResourceQuota"
CLUSTER_CONTAINER_DEFAULTS = "defaultProjectContainerResourceLimit"


def effective(
    project_spec: Mapping[str, Any], cluster_spec: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """(namespace quota, container defaults) that the project's namespaces get: the project's
    own, else its cluster's defaults."""
    own = (project_spec.get("namespaceDefaultResourceQuota") or {}).get("limit") or {}
    fallback = (cluster_spec.get(CLUSTER_NAMESPACE_QUOTA) or {}).get("limit") or {}
    containers = project_spec.get("containerDefaultResourceLimit") or cluster_spec.get(
        CLUSTER_CONTAINER_DEFAULTS
    )
    return dict(own or fallback), dict(containers or {})


class QuotaError(Invalid):
    """Bad quota input: `field` names the /v3 field at fault."""


class QuotaExceeded(Invalid):
    """What project `project` (an id) would hold does not fit its quota."""

    def __init__(self, project: str, excesses: Sequence[Excess]) -> None:
        detail = "; ".join(e.describe() for e in excesses)
        super().__init__(f"project {project} quota: {detail}", excesses[0].field, "QuotaExceeded")


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


def parse_quota(value: Any, field: str) -> dict[str, Any] | None:
    """A quota object, `{"limit": {field: quantity}}`, checked; None for no limit."""
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise QuotaError(f"{field} must be an object with a limit", field)
    for key in value:
        if key != "limit":
            raise unknown(f"{field}.{key}", "a quota")
    limits = parse_limits(value.get("limit"), f"{field}.limit")
    return {"limit": limits} if limits else None


def parse_limits(value: Any, field: str, allowed: Iterable[str] = QUOTA_FIELDS) -> dict[str, str]:
    """A `{field: quantity}` object, checked: known fields, valid non-negative quantities
    within the bounds of `corral.core.quantity`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QuotaError(f"{field} must be an object", field)
    allowed = list(allowed)
    result = {}
    for name, given in value.items():
        where = f"{field}.{name}"
        if name not in allowed:
            raise QuotaError(
                f"{where} is not a quota field; known: {', '.join(allowed)}", where, UNKNOWN_FIELD
            )
        if given in (None, ""):
            continue
        try:
            result[name] = quantity.amount(given, where)
        except quantity.QuantityError as exc:
            raise QuotaError(exc.message, where) from None
    return result


def amount(text: str, field: str) -> Decimal:
    """A quantity already stored (in a Project, or by Kubernetes): checked on the way in, but
    perhaps written by hand or before the bounds existed, so capped rather than refused."""
    try:
        return quantity.parse(text, saturate=True)
    except quantity.QuantityError as exc:
        raise QuotaError(f"the stored {field} is not a quantity: {exc}", field) from None


def check_project_quota(limit: Mapping[str, str], default: Mapping[str, str]) -> None:
    """A project quota and its namespace default go together, over the same resources, and one
    namespace's default must fit in the project's limit."""
    if bool(limit) != bool(default):
        missing = "namespaceDefaultResourceQuota" if limit else "resourceQuota"
        raise QuotaError(
            "resourceQuota.limit and namespaceDefaultResourceQuota.limit are set together",
            f"{missing}.limit",
        )
    if set(limit) != set(default):
        differ = sorted(set(limit) ^ set(default))
        raise QuotaError(
            f"the project limit and the namespace default must name the same resources; "
            f"only one names {', '.join(differ)}",
            "namespaceDefaultResourceQuota.limit",
        )
    for excess in overcommit(limit, default, 1):
        raise QuotaError(excess.describe(), "namespaceDefaultResourceQuota.limit")


def overcommit(
    limit: Mapping[str, str], default: Mapping[str, str], namespaces: int
) -> list[Excess]:
    """What `namespaces` namespaces, each given `default`, would take beyond `limit`."""
    found = []
    for field, text in sorted(limit.items()):
        if field not in default:
            continue
        each, cap = amount(default[field], field), amount(text, field)
        wanted = each * namespaces
        if wanted > cap and not unlimited(cap):
            found.append(
                Excess(field, wanted, cap, f"{namespaces} namespace(s) x {show(each, field)}")
            )
    return found


def below_use(limit: Mapping[str, str], used: Mapping[str, Decimal], what: str) -> list[Excess]:
    """Resources whose new `limit` is lower than what is `used` already."""
    caps = {field: amount(text, field) for field, text in sorted(limit.items())}
    return [
        Excess(field, used[field], cap, f"{what} already uses")
        for field, cap in caps.items()
        if field in used and used[field] > cap and not unlimited(cap)
    ]


def unlimited(cap: Decimal) -> bool:
    """The largest quantity (or one beyond it, stored before the bound) is no limit: nothing
    can be shown to exceed it."""
    return cap >= quantity.MAX_VALUE


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


def check_container_defaults(
    defaults: Mapping[str, str], name: str = "containerDefaultResourceLimit"
) -> None:
    """A default request must not exceed the default limit of the same resource."""
    for resource in ("Cpu", "Memory"):
        request, cap = defaults.get(f"requests{resource}"), defaults.get(f"limits{resource}")
        field = f"{name}.requests{resource}"
        if request and cap and amount(request, field) > amount(cap, field):
            raise QuotaError(
                f"requests{resource} {request} is more than limits{resource} {cap}", field
            )


def usage(quotas: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Decimal]]:
    """`used` and `hard` per /v3 quota field, summed over ResourceQuota objects' status.
    Kubernetes keeps decimal quantities of any size: those beyond the bound count as the
    bound, and a value that is no quantity at all (never written by Kubernetes) is skipped."""
    names = {v: k for k, v in QUOTA_FIELDS.items()}
    totals: dict[str, dict[str, Decimal]] = {"used": {}, "hard": {}}
    for quota in quotas:
        status = quota.get("status") or {}
        for part in ("used", "hard"):
            for resource, text in (status.get(part) or {}).items():
                if resource not in names:
                    continue
                field = names[resource]
                try:
                    value = amount(str(text), field)
                except QuotaError as exc:
                    where = (quota.get("metadata") or {}).get("namespace")
                    log.warning("ResourceQuota in namespace %s: %s", where, exc.message)
                    continue
                totals[part][field] = totals[part].get(field, Decimal(0)) + value
    return totals


def printable(values: Mapping[str, Decimal]) -> dict[str, str]:
    return {field: show(value, field) for field, value in sorted(values.items())}


# -- reservations: room taken by a namespace on its way into a project ---------------------------

# An annotation on the Project per namespace being admitted, holding when: it counts as a
# member until the namespace is in place (then it is removed) or it expires (its request died).
RESERVATION_PREFIX = "reservation.management.svc.io/"
RESERVATION_TTL = datetime.timedelta(seconds=60)


# A count of the reservations ever made on the Project, moved by each and never back. A
# change checked against the Project is written on condition that its annotations are still
# as read: without the count, a reservation made and released meanwhile (its namespace now in
# the project) would leave them as they were, and the change would pass over that namespace.
RESERVATION_COUNT = "management.svc.io/reservation-count"


def reservation_key(namespace: str) -> str:
    return f"{RESERVATION_PREFIX}{namespace}"


def next_count(annotations: Mapping[str, str]) -> str:
    """The reservation count after one more reservation."""
    try:
        return str(int(annotations.get(RESERVATION_COUNT, "0")) + 1)
    except ValueError:
        return "1"


def reservations(
    annotations: Mapping[str, str], now: datetime.datetime
) -> tuple[set[str], list[str]]:
    """(namespaces reserved now, annotation keys of expired or unreadable reservations)."""
    live, expired = set(), []
    for key, value in annotations.items():
        if not key.startswith(RESERVATION_PREFIX):
            continue
        try:
            since = datetime.datetime.fromisoformat(value)
        except (TypeError, ValueError):
            since = None
        if since is not None and since.tzinfo is not None and abs(now - since) < RESERVATION_TTL:
            live.add(key.removeprefix(RESERVATION_PREFIX))
        else:
            expired.append(key)
    return live, sorted(expired)
