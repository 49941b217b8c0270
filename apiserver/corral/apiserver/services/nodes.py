"""A cluster's nodes (spec 4.3), as the Node CRs the operator mirrors. Changes go where they
belong: taints and schedulability into the CR's desired fields (the operator applies them and
reports `Updated` and `Drained`), deletion straight to the downstream node (the operator then
drops the CR). The caller owns the node's cluster: the route checked it before finding the
node, as a nested resource's parent is checked first.
"""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, name_text
from corral.core import errors
from corral.core.clusters import taints
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

ROLES = ("etcd", "controlPlane", "worker")


async def update(deps: Deps, obj: Obj, body: dict[str, Any]) -> Obj:
    spec = obj.get("spec") or {}
    # Compared with what a GET shows of them, so that a node read can be put back.
    shown = {"requestedHostname": spec.get("requestedHostname", "")}
    shown |= {role: spec.get(role, False) for role in ROLES}
    for field, value in shown.items():
        if field in body and body[field] != value:
            raise errors.invalid(field, f"{field} cannot be changed", code="InvalidAction")
    patch: dict[str, Any] = {}
    if "displayName" in body:
        patch["displayName"] = name_text(body, "displayName")
    if "description" in body:
        patch["description"] = description_text(body)
    if "desiredNodeTaints" in body:
        # Validated as the cluster would, so a taint it refuses never reaches the Node CR.
        given = body["desiredNodeTaints"]
        patch["desiredNodeTaints"] = None if given is None else taints.parse(given)
    return await desire(deps, obj, patch)


async def desire(deps: Deps, obj: Obj, patch: dict[str, Any]) -> Obj:
    """The node with `patch` merged into its spec: what the operator is to make of it."""
    if not patch:
        return obj
    meta = obj["metadata"]
    updated = as_dict(
        await deps.kube.patch(
            kinds.Node,
            meta["name"],
            {"spec": patch},
            namespace=meta["namespace"],
            patch_type=PatchType.MERGE,
        )
    )
    deps.stores.nodes.put(updated)
    return updated


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    """Removes the node from the cluster; the operator then removes its Node CR. A node
    pool's machine is removed by deleting its record: the operator removes the machine
    through its driver (drained first when its pool says so), and the pool makes another."""
    cluster = obj["metadata"]["namespace"]
    if obj["spec"].get("nodePoolName"):
        await delete_if_present(deps.kube, kinds.Node, obj["metadata"]["name"], cluster)
        return
    if deps.connections.credential(cluster) is None:
        # Not a conflict (409 is for what already exists): the cluster cannot be reached
        # until it is imported, so the node cannot be deleted there yet.
        raise errors.Unavailable(
            f"cluster {cluster} cannot be reached: corral has no credential for it (it waits "
            "for an import), so the node cannot be deleted in it"
        )
    node_name = (obj.get("status") or {}).get("nodeName") or obj["spec"]["requestedHostname"]
    client = await deps.connections.client_as(cluster, who.downstream())
    await delete_if_present(client, DownstreamNode, node_name)
