"""`/v3/nodepools` (spec 2.5, 4.4): a cluster kept at a quantity of machines from one template.

A pool is a `NodePool` named `np-xxxxx` in the namespace named after its cluster; its id is
`<cluster>:<name>`. The cluster's members see its pools; its owners (and administrators)
create, change and delete them. A pool names a node template its creator may use (their own;
any, for administrators) whose driver is active and ready; the same holds for a PUT that names
another template or raises `quantity`, so a deactivated driver refuses new pools and scale-ups
and leaves the machines there alone. The operator makes the machines (`downstream.pools`).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import either, name_text, or_empty, read_json, referenced
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import owned
from corral.apiserver.services.visibility import owned_cluster, visible_cluster
from corral.core import errors
from corral.core.api import ids, names
from corral.core.api.ids import ScopedId
from corral.core.clusters import taints
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.nodepools import spec as pool_spec
from corral.core.nodepools.status import state

MAX_DISPLAY_NAME = 256
IMMUTABLE = ("clusterId", "clusterName", "hostnamePrefix", *pool_spec.ROLES)
SCHEMA = Schema(
    id="nodePool",
    plural="nodePools",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "displayName": Field("string", create=True, update=True),
        "clusterId": Field("reference[cluster]", create=True, required=True,
                           description="Immutable; clusterName is the same"),
        "clusterName": Field("reference[cluster]", create=True),
        "hostnamePrefix": Field("string", create=True, required=True,
                                description="Immutable; hostnames are it and a number"),
        "quantity": Field("int", create=True, update=True, default=1,
                          description=f"0 to {pool_spec.MAX_QUANTITY}; a change scales"),
        **{role: Field("boolean", create=True, default=False, description="Immutable")
           for role in pool_spec.ROLES},
        "nodeTemplateName": Field("reference[nodeTemplate]", create=True, update=True,
                                  required=True),
        "nodeLabels": Field("map[string]", create=True, update=True),
        "nodeAnnotations": Field("map[string]", create=True, update=True),
        "nodeTaints": Field("array[taint]", create=True, update=True),
        "drainBeforeDelete": Field("boolean", create=True, update=True, default=False),
        "deleteNotReadyAfterSecs": Field(
            "int", create=True, update=True, default=0,
            description=f"0 (never) to {pool_spec.MAX_NOT_READY_SECS}"),
        "requested": readonly("int", "Machines the pool has"),
        "provisioning": readonly("int", "Machines not yet Ready"),
        "ready": readonly("int", "Machines whose node is Ready"),
        "failing": readonly("int", "Machines whose driver reports a failure"),
        "lastError": readonly("string"),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
)  # fmt: skip

routes = web.RouteTableDef()


def pool_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def fields(obj: Obj) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    current, transitioning, message = state(obj)
    return {
        "id": pool_id(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        "clusterId": obj["metadata"]["namespace"],
        "clusterName": obj["metadata"]["namespace"],
        "hostnamePrefix": spec.get("hostnamePrefix", ""),
        "quantity": spec.get("quantity", 1),
        **{role: bool(spec.get(role)) for role in pool_spec.ROLES},
        "nodeTemplateName": spec.get("nodeTemplateName", ""),
        "nodeLabels": spec.get("nodeLabels") or {},
        "nodeAnnotations": spec.get("nodeAnnotations") or {},
        "nodeTaints": spec.get("nodeTaints") or [],
        "drainBeforeDelete": bool(spec.get("drainBeforeDelete")),
        "deleteNotReadyAfterSecs": spec.get("deleteNotReadyAfterSecs", 0),
        **{count: status.get(count, 0) for count in ("requested", "provisioning", "ready",
                                                     "failing")},
        "lastError": status.get("lastError", ""),
        "state": current,
        "transitioning": transitioning,
        "transitioningMessage": message,
        **object_stamp(obj),
    }  # fmt: skip


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    base, cluster = base_url(request), obj["metadata"]["namespace"]
    body = {**fields(obj), **object_fields(obj, ("name", "namespace", "creationTimestamp"))}
    links = {
        "cluster": f"{base}/v3/clusters/{cluster}",
        "nodeTemplate": f"{base}/v3/nodetemplates/{obj['spec'].get('nodeTemplateName', '')}",
        "nodes": f"{base}/v3/clusters/{cluster}/nodes?nodePoolId={pool_id(obj)}",
    }
    return envelope.resource(base, SCHEMA, body, links=links)


def found(request: web.Request, change: str | None = None) -> Obj:
    """The pool the path names, for the cluster's members (404 for anyone else, whether it
    exists or not); with `change`, the caller must own the cluster (403)."""
    pid = ScopedId.parse_or_none(request.match_info["id"])
    obj = request.app[DEPS].stores.nodepools.get(pid.key) if pid else None
    if pid is None or obj is None or access(request).cluster_role(pid.namespace) is None:
        raise errors.not_found(f"node pool {request.match_info['id']} not found")
    if change is not None:
        owned_cluster(deps(request), caller(request), pid.namespace, change)
    return obj


@routes.get(v3("nodepools"))
async def list_pools(request: web.Request) -> web.Response:
    allowed, pools = access(request), request.app[DEPS].stores.nodepools
    cluster = request.query.get("clusterId")
    objs = pools.by_index("cluster", cluster) if cluster else pools.all()
    body = envelope.collection(
        base_url(request), SCHEMA,
        (o for o in objs if allowed.cluster_role(o["metadata"]["namespace"]) is not None),
        pool_id, fields, lambda o: render(request, o), request.query, request.path,
        can_create=True,
    )  # fmt: skip
    return web.json_response(body)


@routes.get(v3("nodepools", "/{id}"))
async def get_pool(request: web.Request) -> web.Response:
    return web.json_response(render(request, found(request)))


@routes.post(v3("nodepools"))
async def create_pool(request: web.Request) -> web.Response:
    body = await read_json(request)
    if body.get("type", SCHEMA.id) != SCHEMA.id:
        raise errors.invalid("type", f"type must be {SCHEMA.id}")
    cluster_id = either(body, ("clusterId", "clusterName"), ids.MAX_LABEL)
    held, who = deps(request), caller(request)
    cluster = referenced(lambda: visible_cluster(held, who, cluster_id), "clusterId",
                         f"cluster {cluster_id}")  # fmt: skip
    owned_cluster(deps(request), caller(request), cluster_id, "add node pools to it")
    if cluster_id == names.LOCAL_CLUSTER:
        # The operator is granted no writes to the management cluster's nodes (chart RBAC).
        raise errors.invalid("clusterId", "the management cluster has no node pools",
                             "InvalidReference")  # fmt: skip
    if cluster["metadata"].get("deletionTimestamp"):
        raise ApiError(409, "Conflict", f"cluster {cluster_id} is being deleted")
    spec: dict[str, Any] = {
        "clusterName": cluster_id,
        "hostnamePrefix": pool_spec.hostname_prefix(body.get("hostnamePrefix")),
        "quantity": pool_spec.quantity(body.get("quantity", 1)),
        **{role: pool_spec.flag(body.get(role, False), role) for role in pool_spec.ROLES},
        "nodeTemplateName": owned.usable_template(
            deps(request), caller(request), body.get("nodeTemplateName")
        ),
        **changeable(body),
    }
    metadata = ObjectMeta(name=ids.generate("np"), namespace=cluster_id)
    created = as_dict(
        await request.app[DEPS].kube.create(kinds.NodePool(metadata=metadata, spec=spec))
    )
    request.app[DEPS].stores.nodepools.put(created)
    return web.json_response(render(request, created), status=201)


def changeable(body: dict[str, Any]) -> dict[str, Any]:
    """The fields a PUT may change, other than the template and quantity, as the body gives."""
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


@routes.put(v3("nodepools", "/{id}"))
async def update_pool(request: web.Request) -> web.Response:
    """Changes what the body gives. Raising `quantity` or naming another template needs a
    usable template, as a new pool does; lowering it never does."""
    obj = found(request, "change its node pools")
    body = await read_json(request)
    current = obj.get("spec") or {}
    shown = fields(obj)
    for field in IMMUTABLE:
        if field in body and body[field] != shown[field]:
            raise errors.invalid(field, f"{field} cannot be changed after the pool is created",
                                 "InvalidAction")  # fmt: skip
    spec = changeable(body)
    template = current.get("nodeTemplateName", "")
    if "nodeTemplateName" in body and body["nodeTemplateName"] != template:
        template = spec["nodeTemplateName"] = owned.usable_template(
            deps(request), caller(request), body["nodeTemplateName"]
        )
    if "quantity" in body:
        spec["quantity"] = pool_spec.quantity(body["quantity"])
        if spec["quantity"] > current.get("quantity", 1) and "nodeTemplateName" not in spec:
            owned.usable_template(deps(request), caller(request), template)
    if not spec:
        return web.json_response(render(request, obj))
    meta = obj["metadata"]
    patch = [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in spec.items()]
    patched = as_dict(await request.app[DEPS].kube.patch(
        kinds.NodePool, meta["name"], patch, namespace=meta["namespace"],
        patch_type=PatchType.JSON,
    ))  # fmt: skip
    request.app[DEPS].stores.nodepools.put(patched)
    return web.json_response(render(request, patched))


@routes.delete(v3("nodepools", "/{id}"))
async def delete_pool(request: web.Request) -> web.Response:
    """The operator removes the pool's machines (drained first when the pool says so) before
    the pool goes."""
    obj = found(request, "delete its node pools")
    meta = obj["metadata"]
    await delete_if_present(request.app[DEPS].kube, kinds.NodePool, meta["name"], meta["namespace"])
    return web.Response(status=204)
