"""How far a hosted control plane has come, and when it is stuck, why: computed from its
StatefulSet, Deployment, pods and volume claims as read from the management cluster.

Pure: the provisioner reads the objects and writes what this returns into
`status.provisioning`, which the cluster's conditions show (`Pending`'s message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.provisioning.manifests import COMPONENT_LABEL, CONTROL_PLANE

Obj = Mapping[str, Any]

# Why a container is not running that will not mend by waiting a little.
STUCK_WAITING = {
    "CrashLoopBackOff",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}
MAX_DETAIL = 500


@dataclass(frozen=True)
class Seen:
    etcd_ready: bool
    control_plane_ready: bool
    message: str  # what is awaited, and why it is stuck when it is
    # The control-plane Deployment's pods: wanted, of the current template, and all of them
    # (one more than wanted while a roll surges).
    wanted: int = 1
    updated: int = 0
    replicas: int = 0
    problems: tuple[str, ...] = ()  # why it is stuck, when it is (also in `message`)

    @property
    def ready(self) -> bool:
        return self.etcd_ready and self.control_plane_ready


def control_plane(
    statefulset: Obj | None,
    deployment: Obj | None,
    pods: Sequence[Obj],
    claims: Sequence[Obj],
) -> Seen:
    ready_etcd = etcd_ready(statefulset)
    deployment_ready = _rolled(deployment) and not _leaving(pods)
    counts = _counts(deployment)
    if ready_etcd and deployment_ready:
        return Seen(True, True, "", *counts)
    waiting = (
        "etcd" if not ready_etcd else "kube-apiserver, kube-controller-manager, kube-scheduler"
    )
    problems = [*_claim_problems(claims), *_pod_problems(pods)]
    message = f"waiting for {waiting}"
    if problems:
        message += ": " + "; ".join(problems)
    return Seen(ready_etcd, deployment_ready, message, *counts, tuple(problems))


def etcd_ready(statefulset: Obj | None) -> bool:
    return _ready_replicas(statefulset) >= 1


def _counts(deployment: Obj | None) -> tuple[int, int, int]:
    if deployment is None:
        return 1, 0, 0
    status = deployment.get("status") or {}
    return (
        int((deployment.get("spec") or {}).get("replicas", 1)),
        int(status.get("updatedReplicas") or 0),
        int(status.get("replicas") or 0),
    )


def _ready_replicas(workload: Obj | None) -> int:
    if workload is None:
        return 0
    return int((workload.get("status") or {}).get("readyReplicas") or 0)


def _rolled(deployment: Obj | None) -> bool:
    """Every replica of the current template is available, and nothing older is left."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    generation = deployment["metadata"].get("generation", 0)
    return (
        wanted >= 1
        and int(status.get("observedGeneration") or 0) >= generation
        and int(status.get("updatedReplicas") or 0) >= wanted
        and int(status.get("availableReplicas") or 0) >= wanted
        and int(status.get("replicas") or 0) == wanted
    )


def _leaving(pods: Sequence[Obj]) -> bool:
    """Whether a replaced control-plane pod is still on its way out. Its Deployment no longer
    counts it, but its apiserver serves on (the shutdown delay, and as a sidecar it stops last):
    a roll for new certificates is over only once nothing serves the old ones."""
    return any(
        pod["metadata"].get("deletionTimestamp")
        and (pod["metadata"].get("labels") or {}).get(COMPONENT_LABEL) == CONTROL_PLANE
        for pod in pods
    )


def _claim_problems(claims: Sequence[Obj]) -> list[str]:
    problems = []
    for claim in claims:
        phase = (claim.get("status") or {}).get("phase")
        if phase == "Pending":
            storage_class = (claim.get("spec") or {}).get("storageClassName") or "the default"
            problems.append(
                f"volume claim {claim['metadata']['name']} is Pending (StorageClass "
                f"{storage_class}; setting hosted-control-plane-storage-class chooses it)"
            )
    return problems


def _pod_problems(pods: Sequence[Obj]) -> list[str]:
    problems = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        for condition in status.get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("message")
            ):
                problems.append(f"pod {name} cannot be scheduled: {_short(condition['message'])}")
        # The apiserver is a sidecar: its status is among the init containers'.
        found = [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
        for container in found:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") not in STUCK_WAITING:
                continue
            detail = waiting.get("message") or ""
            last = (container.get("lastState") or {}).get("terminated") or {}
            if last:
                said = last.get("message") or last.get("reason") or ""
                detail = f"exit code {last.get('exitCode')}: {said}".strip()
            problems.append(
                f"container {container.get('name')} of pod {name} is {waiting['reason']}"
                + (f" ({_short(detail)})" if detail else "")
            )
    return problems


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"
