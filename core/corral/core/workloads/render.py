"""A Kubernetes workload object as the flat `/v3` workload's own fields (spec 2.8): the
inverse of `spec`, showing each mapped field as a client wrote it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.workloads import state
from corral.core.workloads.kinds import CRON_JOB, DEPLOYMENT, STATEFUL_SET, Kind, WorkloadId
from corral.core.workloads.spec import CONTAINER_FIELDS, POD_FLAGS, POD_NAMES

# The fields a workload's id alone gives: a listing filters and sorts by these without
# rendering any workload.
ID_FIELDS = frozenset({"id", "name", "namespaceId", "workloadType"})


def id_fields(wid: WorkloadId) -> dict[str, Any]:
    return {"id": str(wid), "name": wid.name, "namespaceId": wid.namespace,
            "workloadType": wid.kind.type}  # fmt: skip


def fields(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    pod = kind.pod_template(obj).get("spec") or {}
    body: dict[str, Any] = {
        **id_fields(WorkloadId.of(kind, obj)),
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "containers": [
            {k: c[k] for k in CONTAINER_FIELDS if k in c} for c in pod.get("containers") or []
        ],
        "volumes": pod.get("volumes") or [],
        "scheduling": {
            "node": {"nodeSelector": pod.get("nodeSelector") or {}},
            "tolerations": pod.get("tolerations") or [],
            "affinity": pod.get("affinity") or {},
        },
        **{field: bool(pod.get(field)) for field in POD_FLAGS},
        "securityContext": pod.get("securityContext") or {},
        **{field: pod.get(field) or "" for field in POD_NAMES},
        "state": state.state(kind, obj),
        "status": state.counts(kind, obj),
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }
    if kind.scalable:
        body["scale"] = spec.get("replicas", 1)
    if kind.type == DEPLOYMENT:
        body["paused"] = bool(spec.get("paused"))
    if kind.type == CRON_JOB:
        body["schedule"] = spec.get("schedule", "")
    if kind.type == STATEFUL_SET:
        body["volumeClaimTemplates"] = [
            {
                "name": t["metadata"]["name"],
                "spec": {
                    k: v
                    for k, v in (t.get("spec") or {}).items()
                    if k in ("accessModes", "resources", "storageClassName")
                },
            }
            for t in spec.get("volumeClaimTemplates") or []
        ]
    return body
