"""A `kubernetesVersion` change of a provisioned cluster (docs/provisioning.md, "Changing the
Kubernetes version"): checked against the cluster as stored now and written at that version,
so that a restore or rotation asked meanwhile is seen. The provisioner carries the roll out."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube.types import PatchType

from corral.apiserver.http.errors import ApiError
from corral.apiserver.keys import KUBE, STORES
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.provisioning import upgrade
from corral.core.provisioning.flavours import Flavour

# The operator writes the cluster's status every few seconds while it provisions: a write at a
# resourceVersion may meet one of those, and is then checked and tried again.
ATTEMPTS = 5


async def change_version(request: web.Request, obj: Obj, flavour: Flavour, given: Any) -> Obj:
    """The cluster with `spec.kubernetesVersion` (and its configuration's) moved to `given`,
    or as it is when `given` names its version; 422 or 409 (`upgrade.admit`) writes nothing."""
    kube = request.app[KUBE]
    name = obj["metadata"]["name"]
    for _ in range(ATTEMPTS):
        current = as_dict(await kube.get(kinds.Cluster, name))
        spec = current.get("spec") or {}
        provisioning = (current.get("status") or {}).get("provisioning")
        wanted = upgrade.admit(flavour, spec, provisioning, given, request.app[STORES].catalog())
        if wanted is None:
            return current
        merge: dict[str, Any] = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": {"kubernetesVersion": wanted},
        }
        if isinstance(spec.get(flavour.config_field), dict):
            # The configuration renders the version too: it must not name the old one.
            merge["spec"][flavour.config_field] = {"kubernetesVersion": given}
        try:
            patched = await kube.patch(kinds.Cluster, name, merge, patch_type=PatchType.MERGE)
        except KubeApiError as exc:
            if exc.status.code != 409:
                raise
            continue
        stored = as_dict(patched)
        request.app[STORES].clusters.put(stored)
        return stored
    raise ApiError(409, "Conflict", f"cluster {name} kept changing meanwhile; try again")
