"""What corral keeps of a downstream pod. A pod's size is its user's to choose (environment,
arguments, probes, volumes, up to what Kubernetes stores); copies cut to what corral reads keep
its memory in proportion to the number of pods, not to their size.

- `trimmed`: what the API server renders and its rules read (the pod's view, its workload, its
  quota usage, its endpoints);
- `for_scheduling`: what the operator's node totals and autoscaler read: the whole pod but its
  containers' bulk and its managed fields."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.workloads.kinds import Obj

METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp",
            "deletionTimestamp", "labels", "annotations")  # fmt: skip
OWNER = ("apiVersion", "kind", "name", "uid", "controller")
CONTAINER = ("name", "image", "resources", "ports")
SCHEDULED_CONTAINER = ("name", "resources", "restartPolicy")
CONTAINER_STATUS = ("name", "image", "ready", "restartCount", "state")
STATUS = ("phase", "hostIP", "podIP", "startTime")


def trimmed(pod: Obj) -> Obj:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    kept_meta = _pick(meta, METADATA)
    if meta.get("ownerReferences"):
        kept_meta["ownerReferences"] = [_pick(o, OWNER) for o in meta["ownerReferences"]]
    kept_status = _pick(status, STATUS)
    if status.get("containerStatuses"):
        kept_status["containerStatuses"] = [
            _pick(c, CONTAINER_STATUS) for c in status["containerStatuses"]
        ]
    kept: Obj = {
        "metadata": kept_meta,
        "spec": {
            **_pick(spec, ("nodeName",)),
            "containers": [_pick(c, CONTAINER) for c in spec.get("containers") or []],
        },
        "status": kept_status,
    }
    return kept


def _pick(source: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: source[k] for k in keys if k in source}


def for_scheduling(pod: Obj) -> Obj:
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "managedFields"}
    spec = dict(pod.get("spec") or {})
    for part in ("containers", "initContainers"):
        if part in spec:
            spec[part] = [_pick(c, SCHEDULED_CONTAINER) for c in spec[part] or []]
    return {**pod, "metadata": meta, "spec": spec}
