"""A `kubernetesVersion` change of a provisioned cluster (docs/provisioning.md, "Changing the
Kubernetes version"): what moves the cluster, as stored now, to the version asked for. The
change is written by `clusters.change_version` (or with the rest of a `/v1` update) on
condition that what the check read is still so (`upgrade.READS`: the spec and the
provisioner's record of the control plane), so that a restore or rotation asked meanwhile is
seen while the operator's other status writes do not stand in the way. The provisioner
carries the roll out."""

from __future__ import annotations

from typing import Any

from corral.apiserver.deps import Deps
from corral.core import jsonpatch
from corral.core.kube.informer import Obj
from corral.core.provisioning import upgrade
from corral.core.provisioning.flavours import Flavour


def operations(deps: Deps, current: Obj, flavour: Flavour, given: Any) -> list[jsonpatch.Operation]:
    """What moves `current` to the version `given`: nothing when it names the version it has;
    Invalid or Conflict (`upgrade.admit`) when the change is refused."""
    spec = current.get("spec") or {}
    provisioning = (current.get("status") or {}).get("provisioning")
    wanted = upgrade.admit(flavour, spec, provisioning, given, deps.stores.catalog())
    if wanted is None:
        return []
    moved = [jsonpatch.add(current, ("spec", upgrade.FIELD), wanted)]
    if isinstance(spec.get(flavour.config_field), dict):
        # The configuration renders the version too: it must not name the old one.
        moved.append(jsonpatch.add(current, ("spec", flavour.config_field, upgrade.FIELD), given))
    return moved
