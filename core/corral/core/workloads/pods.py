"""What corral keeps of a downstream pod. A pod's size is its user's to choose (environment,
arguments, probes, volumes, up to what Kubernetes stores); copies cut to what corral reads keep
its memory in proportion to the number of pods, not to their size.

- `trimmed`: what the API server renders and its rules read (the pod's view, its workload, its
  quota usage, its endpoints);
- `for_scheduling`: what the operator's node totals and autoscaler read (its informer of every
  pod of a cluster keeps this, and a change of nothing else wakes no pass): the identity, the
  two annotations the autoscaler honours, the controller, where it may and does run, what it
  asks for, whether it holds local storage, its phase and whether the scheduler gave up."""

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
SCHEDULED_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
SCHEDULED_OWNER = ("kind", "controller")
SCHEDULED_SPEC = ("nodeName", "nodeSelector", "tolerations", "overhead")
# The autoscaler's `safe-to-evict` and a static pod's mirror mark.
SCHEDULED_ANNOTATIONS = ("cluster-autoscaler.kubernetes.io/safe-to-evict",
                         "kubernetes.io/config.mirror")  # fmt: skip


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
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    kept_meta = _pick(meta, SCHEDULED_METADATA)
    if annotations := _pick(meta.get("annotations") or {}, SCHEDULED_ANNOTATIONS):
        kept_meta["annotations"] = annotations
    if meta.get("ownerReferences"):
        kept_meta["ownerReferences"] = [_pick(o, SCHEDULED_OWNER) for o in meta["ownerReferences"]]
    kept_spec = _pick(spec, SCHEDULED_SPEC)
    if node_affinity := (spec.get("affinity") or {}).get("nodeAffinity"):
        kept_spec["affinity"] = {"nodeAffinity": node_affinity}
    for part in ("containers", "initContainers"):
        if part in spec:
            kept_spec[part] = [_pick(c, SCHEDULED_CONTAINER) for c in spec[part] or []]
    # Only whether a volume is local storage is read: its kind, not its source.
    if spec.get("volumes"):
        kept_spec["volumes"] = [
            {"name": v.get("name", ""), **({"emptyDir": {}} if "emptyDir" in v else {})}
            for v in spec["volumes"]
        ]
    kept_status = _pick(status, ("phase",))
    unscheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
    if unscheduled:
        kept_status["conditions"] = [_pick(c, ("type", "status", "reason")) for c in unscheduled]
    return {"metadata": kept_meta, "spec": kept_spec, "status": kept_status}
