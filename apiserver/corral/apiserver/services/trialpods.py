"""One pod of a workload, created as a dry run (`dryRun=All`) before the workload is written:
what the namespace's admission makes of it.

Pod Security Admission judges pods, not their controllers: a Deployment whose pods break the
namespace's level is admitted (with a warning only kubectl shows) and its pods are then refused
one by one, out of the user's sight. A trial pod is judged as those pods will be, so a refusal
reaches the user at once as 422 with Kubernetes' own reason. The same trial fills in the
namespace's container defaults, which the quota check needs (`services.workloads`).

The client is a parameter: the caller's own (impersonating) client judges the pod as the
caller's pods would be judged.
"""

from __future__ import annotations

import copy
from typing import cast

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Pod

from corral.core import errors
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.workloads.kinds import Kind

# How Kubernetes' PodSecurity admission words a refusal (staging/src/k8s.io/pod-security-admission).
VIOLATES = "violates PodSecurity"


def trial(kind: Kind, obj: Obj) -> Pod:
    """A pod of the workload's template, in its namespace."""
    template = kind.pod_template(obj)
    spec = copy.deepcopy(template.get("spec") or {})
    # A StatefulSet's controller gives each pod a volume per claim template, which its
    # containers mount by the template's name: without it the pod would not be valid.
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for claim in (obj.get("spec") or {}).get("volumeClaimTemplates") or []:
        name = claim["metadata"]["name"]
        if name not in volumes:
            spec.setdefault("volumes", []).append(
                {
                    "name": name,
                    "persistentVolumeClaim": {"claimName": f"{name}-{obj['metadata']['name']}-0"},
                }
            )
    pod = Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{obj['metadata']['name']}-",
                "namespace": obj["metadata"]["namespace"],
                "labels": (template.get("metadata") or {}).get("labels"),
            },
            "spec": spec,
        }
    )
    return cast(Pod, pod)


async def admitted(client: AsyncClient, kind: Kind, obj: Obj, project_id: str) -> Obj:
    """The trial pod as the namespace's admission would make it. 422 `PodSecurity` when its
    Pod Security level refuses it, 422 `QuotaExceeded` when the quota refuses one pod."""
    try:
        return as_dict(await client.create(trial(kind, obj), dry_run=True))
    except KubeApiError as exc:
        message = exc.status.message or ""
        if exc.status.code == 403 and VIOLATES in message:
            raise errors.Invalid(
                f"namespace {obj['metadata']['namespace']} would refuse this workload's pods: "
                f"{message}",
                code="PodSecurity",
            ) from None
        if exc.status.code == 403 and "quota" in message:
            raise errors.invalid(
                "containers", f"project {project_id} quota: {message}", "QuotaExceeded"
            ) from None
        raise
