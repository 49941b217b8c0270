"""A `kubernetesVersion` change of a provisioned cluster (docs/provisioning.md, "Changing the
Kubernetes version"): checked against the cluster as stored now and written on condition that
what the check read is still so (`upgrade.READS`: the spec and the provisioner's record of the
control plane), so that a restore or rotation asked meanwhile is seen while the operator's
other status writes do not stand in the way. The provisioner carries the roll out."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.deps import DEPS
from corral.core import jsonpatch
from corral.core.kube import guarded, kinds
from corral.core.kube.informer import Obj
from corral.core.provisioning import upgrade
from corral.core.provisioning.flavours import Flavour


def operations(
    request: web.Request, current: Obj, flavour: Flavour, given: Any
) -> list[jsonpatch.Operation]:
    """What moves `current` to the version `given`: nothing when it names the version it has;
    Invalid or Conflict (`upgrade.admit`) when the change is refused."""
    spec = current.get("spec") or {}
    provisioning = (current.get("status") or {}).get("provisioning")
    wanted = upgrade.admit(flavour, spec, provisioning, given, request.app[DEPS].stores.catalog())
    if wanted is None:
        return []
    moved = [jsonpatch.add(current, ("spec", upgrade.FIELD), wanted)]
    if isinstance(spec.get(flavour.config_field), dict):
        # The configuration renders the version too: it must not name the old one.
        moved.append(jsonpatch.add(current, ("spec", flavour.config_field, upgrade.FIELD), given))
    return moved


async def change_version(request: web.Request, obj: Obj, flavour: Flavour, given: Any) -> Obj:
    """The cluster with `spec.kubernetesVersion` (and its configuration's) moved to `given`,
    or as it is when `given` names its version; 422 or 409 (`upgrade.admit`) writes nothing."""

    async def decide(current: Obj) -> list[jsonpatch.Operation]:
        return operations(request, current, flavour, given)

    kube = request.app[DEPS].kube
    stored = await guarded.patch(
        kube, kinds.Cluster, obj["metadata"]["name"], decide, upgrade.READS
    )
    request.app[DEPS].stores.clusters.put(stored)
    return stored
