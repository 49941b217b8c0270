"""A workload's `state` and `status` counts, from its object's rollout status (spec 3.2
leaves the rules open; these are corral's, documented in docs/api.md):

- `paused`: a Deployment with `spec.paused`, a suspended CronJob or Job;
- `stopped`: it asks for no pods (scale 0, a DaemonSet no node takes), or a Job has finished;
- `updating`: the controller has not seen the latest spec yet, or pods of the latest spec are
  missing or not available yet;
- `active`: otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.workloads.kinds import CRON_JOB, DAEMON_SET, DEPLOYMENT, JOB, STATEFUL_SET, Kind

ACTIVE, UPDATING, PAUSED, STOPPED = "active", "updating", "paused", "stopped"


def state(kind: Kind, obj: Mapping[str, Any]) -> str:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    seen = status.get("observedGeneration", 0) >= (obj["metadata"].get("generation") or 0)
    if kind.type == DEPLOYMENT:
        wanted = spec.get("replicas", 1)
        if spec.get("paused"):
            return PAUSED
        if wanted == 0 and seen:
            return STOPPED
        done = (
            status.get("updatedReplicas", 0) >= wanted
            and status.get("availableReplicas", 0) >= wanted
            and status.get("replicas", 0) <= wanted
        )
        return ACTIVE if seen and done else UPDATING
    if kind.type == STATEFUL_SET:
        wanted = spec.get("replicas", 1)
        if wanted == 0 and seen:
            return STOPPED
        current = status.get("currentRevision") == status.get("updateRevision")
        done = (
            status.get("updatedReplicas", 0) >= wanted
            and status.get("availableReplicas", 0) >= wanted
        )
        return ACTIVE if seen and current and done else UPDATING
    if kind.type == DAEMON_SET:
        wanted = status.get("desiredNumberScheduled", 0)
        if wanted == 0 and seen:
            return STOPPED
        done = (
            status.get("updatedNumberScheduled", 0) >= wanted
            and status.get("numberAvailable", 0) >= wanted
        )
        return ACTIVE if seen and done else UPDATING
    if kind.type == CRON_JOB:
        return PAUSED if spec.get("suspend") else ACTIVE
    if kind.type == JOB:
        if spec.get("suspend"):
            return PAUSED
        finished = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        return STOPPED if finished else ACTIVE
    raise ValueError(kind.type)


def counts(kind: Kind, obj: Mapping[str, Any]) -> dict[str, int]:
    """`replicas`, `readyReplicas`, `availableReplicas`, `unavailableReplicas`: pods, for the
    kinds that keep pods; for a Job its running pods; for a CronJob its running Jobs."""
    status = obj.get("status") or {}
    if kind.type in (DEPLOYMENT, STATEFUL_SET):
        replicas = status.get("replicas", 0)
        ready, available = status.get("readyReplicas", 0), status.get("availableReplicas", 0)
        unavailable = status.get("unavailableReplicas", max(replicas - available, 0))
    elif kind.type == DAEMON_SET:
        replicas = status.get("desiredNumberScheduled", 0)
        ready, available = status.get("numberReady", 0), status.get("numberAvailable", 0)
        unavailable = status.get("numberUnavailable", 0)
    elif kind.type == JOB:
        replicas = status.get("active", 0)
        ready = available = status.get("ready", 0)
        unavailable = max(replicas - ready, 0)
    else:
        replicas = ready = available = len(status.get("active") or [])
        unavailable = 0
    return {
        "replicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": available,
        "unavailableReplicas": unavailable,
    }
