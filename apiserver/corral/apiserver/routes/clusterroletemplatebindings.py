"""`/v3/clusterroletemplatebindings`: who owns or is a member of a cluster: a user (`userId`)
or every member of a provider's group (`groupPrincipalId`).

A binding lives in the namespace named after its cluster; its id is `<cluster>:<name>`, the
name derived from subject and role (`roles.cluster_binding_name`), so one grant exists only once.
Cluster owners (and administrators) grant and revoke; members of the cluster see its bindings.
The operator turns each into a ClusterRoleBinding downstream (`cluster-admin` for owners,
`corral-cluster-member` for members). Bindings are immutable: replace one to change it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import either, read_json, referenced
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.http.urls import v3
from corral.apiserver.services import bindings
from corral.apiserver.services.visibility import owned_cluster, visible_cluster
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj
from corral.core.projects import roles

SCHEMA = Schema(
    id="clusterRoleTemplateBinding",
    plural="clusterRoleTemplateBindings",
    fields={
        "clusterId": Field("reference[cluster]", create=True, required=True),
        "userId": Field("reference[user]", create=True),
        "groupPrincipalId": Field(
            "reference[principal]", create=True, description="oidc_group://<group>, not with userId"
        ),
        "roleTemplateId": Field(
            "enum", create=True, required=True, options=tuple(roles.CLUSTER_ROLES)
        ),
        # The stored names, accepted on create and shown back, as for project bindings.
        "clusterName": Field("reference[cluster]", create=True, description="Alias of clusterId"),
        "userName": Field("reference[user]", create=True, description="Alias of userId"),
        "roleTemplateName": Field(
            "enum",
            create=True,
            options=tuple(roles.CLUSTER_ROLES),
            description="Alias of roleTemplateId",
        ),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET", "POST"),
)

routes = web.RouteTableDef()


def binding_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def fields(obj: Obj) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    spec, meta = obj.get("spec") or {}, obj["metadata"]
    return {
        "id": binding_id(obj),
        "name": meta["name"],
        "clusterId": spec.get("clusterName", ""),
        "userId": spec.get("userName", ""),
        "groupPrincipalId": spec.get("groupPrincipalName", ""),
        "roleTemplateId": spec.get("roleTemplateName", ""),
        "clusterName": spec.get("clusterName", ""),
        "userName": spec.get("userName", ""),
        "roleTemplateName": spec.get("roleTemplateName", ""),
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(obj))


def visible(request: web.Request) -> Obj:
    binding = ScopedId.parse_or_none(request.match_info["id"])
    obj = request.app[DEPS].stores.cluster_bindings.get(binding.key) if binding else None
    if binding is None or obj is None or access(request).cluster_role(binding.namespace) is None:
        raise errors.not_found(f"clusterRoleTemplateBinding {request.match_info['id']} not found")
    return obj


@routes.get(v3("clusterroletemplatebindings"))
async def list_bindings(request: web.Request) -> web.Response:
    allowed, stores = access(request), request.app[DEPS].stores
    cluster = request.query.get("clusterId")
    objs = stores.cluster_bindings.by_index("cluster", cluster) if cluster else (
        stores.cluster_bindings.all()
    )  # fmt: skip
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        (o for o in objs if allowed.cluster_role(o["metadata"]["namespace"]) is not None),
        binding_id,
        fields,
        lambda o: render(request, o),
        request.query,
        request.path,
        can_create=True,
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
    referenced(
        lambda: visible_cluster(deps(request), caller(request), cluster),
        "clusterId",
        f"cluster {cluster}",
    )
    existing = request.app[DEPS].stores.cluster_bindings.by_index("cluster", cluster)
    new = bindings.grant(request, body, roles.CLUSTER_ROLES, existing, f"cluster {cluster}")
    owned_cluster(deps(request), caller(request), cluster, "grant roles in it")
    created = await bindings.bind_in_cluster(request, cluster, new)
    return web.json_response(render(request, created), status=201)


@routes.delete(v3("clusterroletemplatebindings", "/{id}"))
async def delete_binding(request: web.Request) -> web.Response:
    obj = visible(request)
    owned_cluster(
        deps(request), caller(request), obj["metadata"]["namespace"], "revoke roles in it"
    )
    await bindings.unbind_cluster(request, obj)
    return web.Response(status=204)
