"""`/v3/clusterroletemplatebindings`: who owns or is a member of a cluster.

A binding lives in the namespace named after its cluster; its id is `<cluster>:<name>`, the
name derived from user and role (`roles.cluster_binding_name`), so one grant exists only once.
Cluster owners (and administrators) grant and revoke; members of the cluster see its bindings.
The operator turns each into a ClusterRoleBinding downstream (`cluster-admin` for owners,
`corral-cluster-member` for members). Bindings are immutable: replace one to change it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver import envelope, errors
from corral.apiserver.authz import access
from corral.apiserver.body import read_json
from corral.apiserver.cache import Obj
from corral.apiserver.keys import KUBE, STORES
from corral.apiserver.routes.clusters import owned_cluster, visible_cluster
from corral.apiserver.routes.common import base_url, either, referenced, v3
from corral.apiserver.routes.projectroletemplatebindings import create_once, grant
from corral.apiserver.schemas import Field, Schema
from corral.core import resources
from corral.core.kube import delete_if_present, ensure_namespace
from corral.core.projects import roles

SCHEMA = Schema(
    id="clusterRoleTemplateBinding",
    plural="clusterRoleTemplateBindings",
    fields={
        "clusterId": Field("reference[cluster]", create=True, required=True),
        "userId": Field("reference[user]", create=True, required=True),
        "roleTemplateId": Field(
            "enum", create=True, required=True, options=tuple(roles.CLUSTER_ROLES)
        ),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET", "POST"),
)

routes = web.RouteTableDef()


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    spec, meta = obj.get("spec") or {}, obj["metadata"]
    body = {
        "id": f"{meta['namespace']}:{meta['name']}",
        "name": meta["name"],
        "clusterId": spec.get("clusterName", ""),
        "userId": spec.get("userName", ""),
        "roleTemplateId": spec.get("roleTemplateName", ""),
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }
    return envelope.resource(base_url(request), SCHEMA, body)


def visible(request: web.Request) -> Obj:
    cluster, _, name = request.match_info["id"].partition(":")
    obj = request.app[STORES].cluster_bindings.get(f"{cluster}/{name}")
    if obj is None or access(request).cluster_role(cluster) is None:
        raise errors.not_found(f"clusterRoleTemplateBinding {request.match_info['id']} not found")
    return obj


@routes.get(v3("clusterroletemplatebindings"))
async def list_bindings(request: web.Request) -> web.Response:
    allowed, stores = access(request), request.app[STORES]
    cluster = request.query.get("clusterId")
    objs = stores.cluster_bindings.by_index("cluster", cluster) if cluster else (
        stores.cluster_bindings.all()
    )  # fmt: skip
    items = [
        render(request, o)
        for o in objs
        if allowed.cluster_role(o["metadata"]["namespace"]) is not None
    ]
    body = envelope.collection(
        base_url(request), SCHEMA, items, request.query, request.path, can_create=True
    )
    return web.json_response(body)


@routes.get(v3("clusterroletemplatebindings", "/{id}"))
async def get_binding(request: web.Request) -> web.Response:
    return web.json_response(render(request, visible(request)))


@routes.post(v3("clusterroletemplatebindings"))
async def create_binding(request: web.Request) -> web.Response:
    body = await read_json(request)
    if body.get("type", "clusterRoleTemplateBinding") != "clusterRoleTemplateBinding":
        raise errors.invalid("type", "type must be clusterRoleTemplateBinding")
    cluster = either(body, ("clusterId", "clusterName"), 63)
    referenced(lambda: visible_cluster(request, cluster), "clusterId", f"cluster {cluster}")
    stores = request.app[STORES]
    existing = stores.cluster_bindings.by_index("cluster", cluster)
    user, role = grant(request, body, roles.CLUSTER_ROLES, existing, f"cluster {cluster}")
    owned_cluster(request, cluster, "grant roles in it")
    await ensure_namespace(request.app[KUBE], cluster, {resources.LABEL_CLUSTER: cluster})
    binding = resources.ClusterRoleTemplateBinding(
        metadata=ObjectMeta(name=roles.cluster_binding_name(user, role), namespace=cluster),
        spec={"clusterName": cluster, "userName": user, "roleTemplateName": role},
    )
    created = await create_once(request, binding, f"{user} already has {role} in cluster {cluster}")
    stores.cluster_bindings.put(created)
    return web.json_response(render(request, created), status=201)


@routes.delete(v3("clusterroletemplatebindings", "/{id}"))
async def delete_binding(request: web.Request) -> web.Response:
    obj = visible(request)
    meta = obj["metadata"]
    owned_cluster(request, meta["namespace"], "revoke roles in it")
    await delete_if_present(
        request.app[KUBE], resources.ClusterRoleTemplateBinding, meta["name"], meta["namespace"]
    )
    request.app[STORES].cluster_bindings.forget(f"{meta['namespace']}/{meta['name']}")
    return web.Response(status=204)
