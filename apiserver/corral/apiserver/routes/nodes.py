"""`/v3/clusters/{cluster_id}/nodes` (spec 4.3): a cluster's nodes, read from the Node CRs
the operator mirrors and changed through `services.nodes`.

Nodes are for the cluster's members and owners: a user bound only to one of its projects sees
the cluster (403 here), not its machines. Changes need the cluster's owners, checked before the
node is looked for.

`POST /v3/nodes` (Rancher's, the cluster in the body) and `POST` on a cluster's nodes add an
existing machine over SSH (`customConfig`); its key is never shown again.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from aiohttp import web

from corral.apiserver.http.body import read_input, read_json
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.query import action, label_selector
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.resources.scoped import cluster_link, scoped_id
from corral.apiserver.resources.subscriptions import Subscribable
from corral.apiserver.services import nodes
from corral.apiserver.services.nodes import ROLES
from corral.apiserver.services.visibility import visible_cluster
from corral.core import errors
from corral.core.api import condition_types as ct
from corral.core.api.ids import ScopedId
from corral.core.drivers import custom
from corral.core.kube.informer import Obj

ACTIONS = ("cordon", "uncordon", "drain")
SCHEMA = Schema(
    id="node",
    plural="nodes",
    fields={
        "name": readonly("string", "The downstream node's name"),
        "nodePoolId": readonly(
            "reference[nodePool]",
            "The pool that made the node; empty for one that joined otherwise",
        ),
        "displayName": Field("string", update=True),
        "description": Field("string", update=True),
        "desiredNodeTaints": Field("array[taint]", update=True),
        "requestedHostname": Field("string", create=True, required=True,
                                   description="Immutable; hostnameOverride is the same"),
        "hostnameOverride": Field("string", create=True),
        "clusterId": Field("reference[cluster]", create=True,
                           description="POST /v3/nodes only: the cluster to join"),
        "customConfig": Field("customConfig", create=True, required=True,
                              description="The machine over SSH; sshKey is never shown"),
        **{role: Field("boolean", create=True, default=role == "worker",
                       description="Immutable; only worker") for role in ROLES},
        "unschedulable": readonly("boolean"),
        "state": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={"cordon": {}, "uncordon": {}, "drain": {"input": "nodeDrainInput"}},
    parent="cluster",
)  # fmt: skip
CUSTOM_CONFIG = Schema(
    id="customConfig",
    plural="customConfigs",
    embedded=True,
    fields={
        "address": Field("string", create=True, required=True,
                         description="IP address or DNS name of the machine (SSH, port 22)"),
        "internalAddress": Field("string", create=True, description="IP address"),
        "user": Field("string", create=True, default=custom.DEFAULT_USER,
                      description="SSH user; another than root needs sudo without a password"),
        "sshKey": Field("password", create=True, required=True, write_only=True,
                        description="Private key (OpenSSH or PEM, no passphrase); write-only"),
    },
)  # fmt: skip
# A body with a key of the largest size corral takes, and room for the rest.
BODY_LIMIT = 64 * 1024
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


NODES = "/v3/{clusters:(?i:clusters)}/{cluster}/{type:(?i:nodes)}"
NODE = NODES + "/{id}"


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    """The resource's fields short of the custom resource's metadata, spec and status:
    small, so collections filter and sort by them."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    internal = status.get("internalNodeStatus") or {}
    return {
        "id": scoped_id(obj),
        "name": status.get("nodeName") or spec.get("requestedHostname", ""),
        "clusterId": meta["namespace"],
        # The pool's id (`<cluster>:<pool>`), as its pool's `nodes` link filters by it.
        "nodePoolId": spec.get("nodePoolName", ""),
        "displayName": spec.get("displayName") or status.get("nodeName", ""),
        "description": spec.get("description", ""),
        "desiredNodeTaints": spec.get("desiredNodeTaints"),
        "requestedHostname": spec.get("requestedHostname", ""),
        "customConfig": custom.shown(spec.get(custom.FIELD)),
        **{role: bool(spec.get(role)) for role in ROLES},
        "unschedulable": bool(internal.get("unschedulable")),
        "state": "removing" if meta.get("deletionTimestamp") else _state(status),
        **object_stamp(obj),
    }


def _state(status: dict[str, Any]) -> str:
    conds = {c["type"]: c for c in status.get("conditions") or []}
    if (status.get("internalNodeStatus") or {}).get("unschedulable"):
        drained = conds.get(ct.DRAINED, {}).get("status") == "True"
        return "drained" if drained else "cordoned"
    return "active" if conds.get(ct.READY, {}).get("status") == "True" else "unavailable"


def url(ask: Ask, obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{ask.base}/v3/clusters/{meta['namespace']}/nodes/{meta['name']}"


def members_cluster(ask: Ask) -> str:
    """The path's cluster, for its members and owners: 404 for one the caller does not see,
    403 for one they see through a project only."""
    cluster = ask.path["cluster"]
    visible_cluster(ask.deps, ask.who, cluster)
    if ask.who.access.cluster_role(cluster) is None:
        raise errors.forbidden(f"only members of cluster {cluster} may see its nodes")
    return cluster


def listed(ask: Ask) -> list[Obj]:
    objs = ask.deps.stores.nodes.by_index("cluster", members_cluster(ask))
    selector = label_selector(ask.query.get("labelSelector", ""))
    return [o for o in objs if selector((o.get("status") or {}).get("nodeLabels") or {})]


def find(ask: Ask, given: str) -> Obj:
    """The node by its id (`<cluster>:<name>`) or by its bare name; 404 naming the cluster."""
    cluster = members_cluster(ask)
    node = ScopedId.parse_or_none(given) if ":" in given else ScopedId(cluster, given)
    obj = ask.deps.stores.nodes.get(f"{cluster}/{node.name}") if node else None
    if obj is None:
        raise errors.not_found(f"node {given} not found in cluster {cluster}")
    return obj


async def create(ask: Ask, body: dict[str, Any]) -> Obj:
    cluster = ask.path["cluster"]
    if body.get("clusterId", cluster) != cluster:
        raise errors.invalid("clusterId", f"the path names cluster {cluster}")
    return await nodes.create(ask.deps, ask.who, cluster, body)


# What each write says it needs the cluster's owners for.
CHANGE, DELETE, ACT, ADD = (
    "change its nodes",
    "delete its nodes",
    "cordon, uncordon or drain its nodes",
    "add its nodes",
)


def may(change: str) -> Callable[..., None]:
    """The check of one kind of write of a node, on the node's own cluster."""

    def check(ask: Ask, obj: Obj, *action: str) -> None:
        nodes.may_change(ask.who, obj["metadata"]["namespace"], change)

    return check


def before_create(ask: Ask) -> None:
    nodes.may_change(ask.who, members_cluster(ask), ADD)


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=listed,
    find=find,
    fields=fields,
    ident=scoped_id,
    detail=lambda ask, obj: object_fields(obj, ("name", "namespace", "creationTimestamp", "uid")),
    links=cluster_link,
    actions=lambda ask, obj: ACTIONS,
    before_create=before_create,
    before_update=may(CHANGE),
    before_delete=may(DELETE),
    before_action=may(ACT),
    create=create,
    collection=NODES,
    url=url,
    body_limit=BODY_LIMIT,
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)

# `GET /v3/subscribe`: a node's changes go to its cluster's members and owners, as `listed`.
SUBSCRIBABLE = Subscribable(
    FAMILY,
    cache="nodes",
    sees=lambda ask, obj: ask.who.access.cluster_role(obj["metadata"]["namespace"]) is not None,
)


@routes.post(v3("nodes"))
async def create_node(request: web.Request) -> web.Response:
    """Rancher's `POST /v3/nodes`: the cluster is the body's `clusterId`."""
    asked = handlers.ask(request)
    body = await read_json(request, BODY_LIMIT)
    obj = await nodes.create(asked.deps, asked.who, nodes.custom_id(body), body)
    return json_response(FAMILY.render(asked, obj), status=201)


def owned_node(request: web.Request, change: str) -> tuple[Ask, Obj]:
    """The node the path names, for the owners of its cluster (403 before the node is looked
    for: the cluster is the path's, the node is not yet)."""
    asked = handlers.ask(request)
    nodes.may_change(asked.who, members_cluster(asked), change)
    return asked, find(asked, request.match_info["id"])


@routes.put(NODE)
async def update_node(request: web.Request) -> web.Response:
    asked, obj = owned_node(request, CHANGE)
    body = await read_json(request)
    SCHEMA.refuse_unknown(body)
    updated = await nodes.update(asked.deps, obj, body)
    return json_response(FAMILY.render(asked, updated))


@routes.delete(NODE)
async def delete_node(request: web.Request) -> web.Response:
    asked, obj = owned_node(request, DELETE)
    await nodes.delete(asked.deps, asked.who, obj)
    return web.Response(status=204)


@routes.post(NODE)
async def node_action(request: web.Request) -> web.Response:
    asked, obj = owned_node(request, ACT)
    name = action(request, set(ACTIONS))
    if name is None:
        raise errors.Unsupported("POST on a node needs ?action=<name>")
    body = await read_input(request, DRAIN if name == "drain" else name)
    if name == "cordon":
        patch: dict[str, Any] = {"desiredNodeUnschedulable": "true"}
    elif name == "uncordon":
        patch = {"desiredNodeUnschedulable": "false"}
    else:
        patch = {"desiredNodeUnschedulable": "drain", "nodeDrainInput": drain_input(body)}
    return json_response(FAMILY.render(asked, await nodes.desire(asked.deps, obj, patch)))


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
