"""`/v3/clusters/{cluster_id}/nodes` (spec 4.3).

Nodes are read from the Node CRs the operator mirrors. Changes go where they belong: taints
and schedulability into the CR's desired fields (the operator applies them and reports
`Updated` and `Drained`), deletion straight to the downstream node (the operator then drops
the CR).
"""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.types import PatchType

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import description_text, name_text, read_json
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.query import action, label_selector
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.services.visibility import owned_cluster, visible_cluster
from corral.core import errors
from corral.core.api import condition_types as ct
from corral.core.api.ids import ScopedId
from corral.core.clusters import taints as node_taints
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

ROLES = ("etcd", "controlPlane", "worker")
SCHEMA = Schema(
    id="node",
    plural="nodes",
    fields={
        "name": readonly("string", "The downstream node's name"),
        "clusterId": readonly("reference[cluster]"),
        "displayName": Field("string", update=True),
        "description": Field("string", update=True),
        "desiredNodeTaints": Field("array[taint]", update=True),
        "requestedHostname": readonly("string"),
        **{role: readonly("boolean") for role in ROLES},
        "unschedulable": readonly("boolean"),
        "state": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET",),
    resource_actions={"cordon": {}, "uncordon": {}, "drain": {"input": "nodeDrainInput"}},
    parent="cluster",
)
DRAIN = Schema(
    id="nodeDrainInput",
    plural="nodeDrainInputs",
    embedded=True,
    fields={
        "force": Field(
            "boolean",
            create=True,
            default=False,
            description="Also evict pods no controller would recreate",
        ),
        "deleteLocalData": Field(
            "boolean", create=True, default=False, description="Also evict pods with emptyDir data"
        ),
        "gracePeriod": Field(
            "int",
            create=True,
            default=-1,
            description="Seconds each pod gets to stop; -1: the pod's own",
        ),
        "ignoreDaemonSets": Field("boolean", create=True, default=True),
        "timeout": Field(
            "int",
            create=True,
            default=120,
            description="Seconds before the drain gives up (1 to 10800)",
        ),
    },
)

routes = web.RouteTableDef()
NODES = "/v3/{clusters:(?i:clusters)}/{cluster}/{type:(?i:nodes)}"


def node_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def fields(obj: Obj) -> dict[str, Any]:
    """The resource's fields short of the custom resource's metadata, spec and status:
    small, so collections filter and sort by them."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    internal = status.get("internalNodeStatus") or {}
    return {
        "id": node_id(obj),
        "name": status.get("nodeName") or spec.get("requestedHostname", ""),
        "clusterId": meta["namespace"],
        "displayName": spec.get("displayName") or status.get("nodeName", ""),
        "description": spec.get("description", ""),
        "desiredNodeTaints": spec.get("desiredNodeTaints"),
        "requestedHostname": spec.get("requestedHostname", ""),
        **{role: bool(spec.get(role)) for role in ROLES},
        "unschedulable": bool(internal.get("unschedulable")),
        "state": "removing" if meta.get("deletionTimestamp") else _state(status),
        **object_stamp(obj),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    meta = obj["metadata"]
    body = {**fields(obj), **object_fields(obj, ("name", "namespace", "creationTimestamp", "uid"))}
    base = base_url(request)
    rendered = envelope.resource(base, SCHEMA, body, actions=["cordon", "uncordon", "drain"])
    url = f"{base}/v3/clusters/{meta['namespace']}/nodes/{meta['name']}"
    rendered["links"] = {
        "self": url,
        "update": url,
        "remove": url,
        "cluster": f"{base}/v3/clusters/{meta['namespace']}",
    }
    rendered["actions"] = {a: f"{url}?action={a}" for a in ("cordon", "uncordon", "drain")}
    return rendered


def _state(status: dict[str, Any]) -> str:
    conds = {c["type"]: c for c in status.get("conditions") or []}
    if (status.get("internalNodeStatus") or {}).get("unschedulable"):
        drained = conds.get(ct.DRAINED, {}).get("status") == "True"
        return "drained" if drained else "cordoned"
    return "active" if conds.get(ct.READY, {}).get("status") == "True" else "unavailable"


def cluster_nodes(request: web.Request) -> tuple[str, list[Obj]]:
    """Nodes are for the cluster's members and owners; a user bound only to one of its
    projects sees the cluster, not its machines."""
    cluster = request.match_info["cluster"]
    visible_cluster(deps(request), caller(request), cluster)
    if access(request).cluster_role(cluster) is None:
        raise errors.forbidden(f"only members of cluster {cluster} may see its nodes")
    return cluster, request.app[DEPS].stores.nodes.by_index("cluster", cluster)


def find_node(request: web.Request, change: str | None = None) -> Obj:
    """The node the path names; with `change`, the caller must own the cluster."""
    cluster, _ = cluster_nodes(request)
    if change is not None:
        owned_cluster(deps(request), caller(request), cluster, change)
    given = request.match_info["node"]
    # By its id (`<cluster>:<name>`) or by its bare name.
    node = ScopedId.parse_or_none(given) if ":" in given else ScopedId(cluster, given)
    obj = request.app[DEPS].stores.nodes.get(f"{cluster}/{node.name}") if node else None
    if obj is None:
        raise errors.not_found(f"node {request.match_info['node']} not found in cluster {cluster}")
    return obj


@routes.get(NODES)
async def list_nodes(request: web.Request) -> web.Response:
    _, objs = cluster_nodes(request)
    selector = label_selector(request.query.get("labelSelector", ""))
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        (o for o in objs if selector((o.get("status") or {}).get("nodeLabels") or {})),
        node_id,
        fields,
        lambda o: render(request, o),
        request.query,
        request.path,
        can_create=False,
    )
    return web.json_response(body)


@routes.get(NODES + "/{node}")
async def get_node(request: web.Request) -> web.Response:
    return web.json_response(render(request, find_node(request)))


@routes.put(NODES + "/{node}")
async def update_node(request: web.Request) -> web.Response:
    obj = find_node(request, "change its nodes")
    body = await read_json(request)
    spec = obj.get("spec") or {}
    for field in ("requestedHostname", *ROLES):
        if field in body and body[field] != spec.get(field):
            raise errors.invalid(field, f"{field} cannot be changed", code="InvalidAction")
    patch: dict[str, Any] = {}
    if "displayName" in body:
        patch["displayName"] = name_text(body, "displayName")
    if "description" in body:
        patch["description"] = description_text(body)
    if "desiredNodeTaints" in body:
        patch["desiredNodeTaints"] = taints(body["desiredNodeTaints"])
    return web.json_response(render(request, await patch_spec(request, obj, patch)))


def taints(value: Any) -> list[dict[str, str]] | None:
    """Validated as the cluster would, so a taint it refuses never reaches the Node CR."""
    if value is None:
        return None
    return node_taints.parse(value)


async def patch_spec(request: web.Request, obj: Obj, patch: dict[str, Any]) -> Obj:
    if not patch:
        return obj
    meta = obj["metadata"]
    updated = as_dict(
        await request.app[DEPS].kube.patch(
            kinds.Node,
            meta["name"],
            {"spec": patch},
            namespace=meta["namespace"],
            patch_type=PatchType.MERGE,
        )
    )
    request.app[DEPS].stores.nodes.put(updated)
    return updated


@routes.delete(NODES + "/{node}")
async def delete_node(request: web.Request) -> web.Response:
    """Removes the node from the cluster; the operator then removes its Node CR. A node
    pool's machine is removed by deleting its record: the operator removes the machine
    through its driver (drained first when its pool says so), and the pool makes another."""
    obj = find_node(request, "delete its nodes")
    cluster = obj["metadata"]["namespace"]
    if obj["spec"].get("nodePoolName"):
        await delete_if_present(
            request.app[DEPS].kube, kinds.Node, obj["metadata"]["name"], cluster
        )
        return web.Response(status=204)
    connections = request.app[DEPS].connections
    if connections.credential(cluster) is None:
        # Not a conflict (409 is for what already exists): the cluster cannot be reached
        # until it is imported, so the node cannot be deleted there yet.
        raise ApiError(
            503,
            "ClusterUnavailable",
            f"cluster {cluster} cannot be reached: corral has no credential for it (it waits "
            "for an import), so the node cannot be deleted in it",
        )
    node_name = (obj.get("status") or {}).get("nodeName") or obj["spec"]["requestedHostname"]
    client = await connections.client_as(cluster, principal(request).downstream())
    await delete_if_present(client, DownstreamNode, node_name)
    return web.Response(status=204)


@routes.post(NODES + "/{node}")
async def node_action(request: web.Request) -> web.Response:
    obj = find_node(request, "cordon, uncordon or drain its nodes")
    name = action(request, {"cordon", "uncordon", "drain"})
    if name is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a node needs ?action=<name>")
    body = await read_json(request)
    if name == "cordon":
        patch: dict[str, Any] = {"desiredNodeUnschedulable": "true"}
    elif name == "uncordon":
        patch = {"desiredNodeUnschedulable": "false"}
    else:
        patch = {"desiredNodeUnschedulable": "drain", "nodeDrainInput": drain_input(body)}
    return web.json_response(render(request, await patch_spec(request, obj, patch)))


def drain_input(body: dict[str, Any]) -> dict[str, Any]:
    drain: dict[str, Any] = {}
    for field in ("force", "deleteLocalData", "ignoreDaemonSets"):
        value = body.get(field, DRAIN.fields[field].default)
        if not isinstance(value, bool):
            raise errors.invalid(field, f"{field} must be true or false")
        drain[field] = value
    for field, low, high in (("gracePeriod", -1, 86400), ("timeout", 1, 10800)):
        value = body.get(field, DRAIN.fields[field].default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise errors.invalid(field, f"{field} must be a whole number from {low} to {high}")
        drain[field] = value
    # A fresh request, even with the same options: the operator drains once per requestedAt.
    drain["requestedAt"] = datetime.datetime.now(datetime.UTC).isoformat()
    return drain
