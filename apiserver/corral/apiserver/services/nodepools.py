"""Node pools (spec 2.5, 4.4): a cluster kept at a quantity of machines from one template.

The cluster's owners (and administrators) create, change and delete its pools. A pool names a
node template its creator may use (their own; any, for administrators) whose driver is active
and ready; the same holds for an update that names another template or raises `quantity`, so
a deactivated driver refuses new pools and scale-ups and leaves the machines there alone. The
operator makes the machines (`downstream.pools`).
"""

from __future__ import annotations

from typing import Any

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import either, name_text, or_empty, referenced
from corral.apiserver.services import owned
from corral.apiserver.services.visibility import (
    owned_cluster,
    require_cluster_owner,
    settle_cluster,
    visible_cluster,
)
from corral.core import errors
from corral.core.api import ids, names
from corral.core.clusters import taints
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.nodepools import spec as pool_spec

TYPE = "nodePool"
MAX_DISPLAY_NAME = 256


def fixed(obj: Obj) -> dict[str, Any]:
    """The fields a pool shows that are fixed once it exists, as it shows them."""
    spec, cluster = obj.get("spec") or {}, obj["metadata"]["namespace"]
    return {
        "clusterId": cluster,
        "clusterName": cluster,
        "hostnamePrefix": spec.get("hostnamePrefix", ""),
        **{role: bool(spec.get(role)) for role in pool_spec.ROLES},
    }


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    if body.get("type", TYPE) != TYPE:
        raise errors.invalid("type", f"type must be {TYPE}")
    cluster_id = either(body, ("clusterId", "clusterName"), ids.MAX_LABEL)
    await settle_cluster(deps, who, cluster_id)
    cluster = referenced(lambda: visible_cluster(deps, who, cluster_id), "clusterId",
                         f"cluster {cluster_id}")  # fmt: skip
    owned_cluster(deps, who, cluster_id, "add node pools to it")
    if cluster_id == names.LOCAL_CLUSTER:
        # The operator is granted no writes to the management cluster's nodes (chart RBAC).
        raise errors.invalid("clusterId", "the management cluster has no node pools",
                             "InvalidReference")  # fmt: skip
    if cluster["metadata"].get("deletionTimestamp"):
        raise errors.Conflict(f"cluster {cluster_id} is being deleted", code="Conflict")
    spec: dict[str, Any] = {
        "clusterName": cluster_id,
        "hostnamePrefix": pool_spec.hostname_prefix(body.get("hostnamePrefix")),
        "quantity": pool_spec.quantity(body.get("quantity", 1)),
        **{role: pool_spec.flag(body.get(role, False), role) for role in pool_spec.ROLES},
        "nodeTemplateName": owned.usable_template(deps, who, body.get("nodeTemplateName")),
        **changeable(body),
    }
    metadata = ObjectMeta(name=ids.generate("np"), namespace=cluster_id)
    created = as_dict(await deps.kube.create(kinds.NodePool(metadata=metadata, spec=spec)))
    deps.stores.nodepools.put(created)
    return created


def changeable(body: dict[str, Any]) -> dict[str, Any]:
    """The fields an update may change, other than the template and quantity, as the body
    gives them."""
    spec: dict[str, Any] = {}
    for field in ("name", "displayName"):
        if field in body:
            spec["displayName"] = name_text(body, field, max_length=MAX_DISPLAY_NAME)
    if "nodeLabels" in body:
        spec["nodeLabels"] = pool_spec.node_labels(body["nodeLabels"])
    if "nodeAnnotations" in body:
        spec["nodeAnnotations"] = pool_spec.node_annotations(body["nodeAnnotations"])
    if "nodeTaints" in body:
        spec["nodeTaints"] = taints.parse(or_empty(body["nodeTaints"], []), "nodeTaints")
    if "drainBeforeDelete" in body:
        spec["drainBeforeDelete"] = pool_spec.flag(body["drainBeforeDelete"], "drainBeforeDelete")
    if "deleteNotReadyAfterSecs" in body:
        spec["deleteNotReadyAfterSecs"] = pool_spec.not_ready_secs(body["deleteNotReadyAfterSecs"])
    return spec


def may_change(who: Caller, obj: Obj) -> None:
    require_cluster_owner(who, obj["metadata"]["namespace"], "change its node pools")


async def update(deps: Deps, who: Caller, obj: Obj, body: dict[str, Any]) -> Obj:
    """Changes what the body gives. Raising `quantity` or naming another template needs a
    usable template, as a new pool does; lowering it never does."""
    may_change(who, obj)
    current = obj.get("spec") or {}
    shown = fixed(obj)
    for field, value in shown.items():
        if field in body and body[field] != value:
            raise errors.invalid(field, f"{field} cannot be changed after the pool is created",
                                 "InvalidAction")  # fmt: skip
    spec = changeable(body)
    template = current.get("nodeTemplateName", "")
    if "nodeTemplateName" in body and body["nodeTemplateName"] != template:
        template = spec["nodeTemplateName"] = owned.usable_template(
            deps, who, body["nodeTemplateName"]
        )
    if "quantity" in body:
        spec["quantity"] = pool_spec.quantity(body["quantity"])
        if spec["quantity"] > current.get("quantity", 1) and "nodeTemplateName" not in spec:
            owned.usable_template(deps, who, template)
    if not spec:
        return obj
    meta = obj["metadata"]
    patch = [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in spec.items()]
    patched = as_dict(await deps.kube.patch(
        kinds.NodePool, meta["name"], patch, namespace=meta["namespace"],
        patch_type=PatchType.JSON,
    ))  # fmt: skip
    deps.stores.nodepools.put(patched)
    return patched


def may_delete(who: Caller, obj: Obj) -> None:
    require_cluster_owner(who, obj["metadata"]["namespace"], "delete its node pools")


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    """The operator removes the pool's machines (drained first when the pool says so) before
    the pool goes."""
    may_delete(who, obj)
    meta = obj["metadata"]
    await delete_if_present(deps.kube, kinds.NodePool, meta["name"], meta["namespace"])
