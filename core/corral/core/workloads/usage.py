"""What a workload takes from its namespace's quota, and whether that fits.

Kubernetes' own quota admission checks pods one at a time, when the controller makes them: a
Deployment whose pods do not fit is accepted, and its pods are refused later, out of sight.
corral answers at the create or update instead: one pod of the workload, as the namespace's
admission makes it (container defaults filled in), times the pods the workload asks for,
against what the namespace's ResourceQuota has left.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from corral.core.projects import quota
from corral.core.projects.quota import Excess
from corral.core.workloads.kinds import DAEMON_SET, Kind

# /v3 quota field -> (container resources part, resource).
POD_FIELDS = {
    "requestsCpu": ("requests", "cpu"),
    "requestsMemory": ("requests", "memory"),
    "limitsCpu": ("limits", "cpu"),
    "limitsMemory": ("limits", "memory"),
}


def per_pod(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """One pod's share of each quota field (its containers summed; one `pods`)."""
    taken: dict[str, Decimal] = {"pods": Decimal(1)}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        for field, (part, resource) in POD_FIELDS.items():
            text = (resources.get(part) or {}).get(resource)
            if text is not None:
                taken[field] = taken.get(field, Decimal(0)) + quota.amount(str(text), field)
    return taken


def pods_wanted(kind: Kind, obj: Mapping[str, Any], nodes: int) -> int:
    """Pods the workload runs at once once rolled out: a DaemonSet one per node (at most),
    a Job its parallelism, a CronJob one Job's."""
    spec = obj.get("spec") or {}
    if kind.scalable:
        return int(spec.get("replicas", 1))
    if kind.type == DAEMON_SET:
        return nodes
    job = ((spec.get("jobTemplate") or {}).get("spec") or {}) if "jobTemplate" in spec else spec
    return int(job.get("parallelism", 1))


def excesses(
    pod: Mapping[str, Decimal],
    count: int,
    releasing: Mapping[str, Decimal],
    hard: Mapping[str, Decimal],
    used: Mapping[str, Decimal],
) -> list[Excess]:
    """The quota fields where `used - releasing + count x pod` would pass `hard`
    (`releasing`: what the workload's pods take now, for an update)."""
    found = []
    for field, cap in sorted(hard.items()):
        adding = pod.get(field, Decimal(0)) * count
        freed = releasing.get(field, Decimal(0))
        if adding - freed <= 0 or quota.unlimited(cap):
            continue
        now = used.get(field, Decimal(0))
        if now - freed + adding > cap:
            explanation = f"used {quota.show(now, field)}"
            if freed:
                explanation += f" - {quota.show(freed, field)} released"
            explanation += f" + {count} pods x {quota.show(pod.get(field, Decimal(0)), field)}"
            found.append(Excess(field, now - freed + adding, cap, explanation))
    return found


def total(pod: Mapping[str, Decimal], count: int) -> dict[str, Decimal]:
    return {field: value * count for field, value in pod.items()}
