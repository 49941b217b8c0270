"""`/v3/projectroletemplatebindings` (spec 2.10, 4.6): who has which role in a project.

A binding lives in its project's backing namespace; its id is `<namespace>:<name>`, the name
derived from user and role (`roles.project_binding_name`), so one grant exists only once.
Project owners (and cluster owners, and administrators) grant and revoke; everyone with a role
in the project sees its bindings. The operator turns each into RoleBindings in every namespace
of the project downstream. Bindings are immutable: replace one to change it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver import envelope, errors
from corral.apiserver.authz import access
from corral.apiserver.body import read_json
from corral.apiserver.keys import KUBE, STORES
from corral.apiserver.routes.common import base_url, either, referenced, v3
from corral.apiserver.routes.projects import owned_project, visible_project
from corral.apiserver.schemas import Field, Schema
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.projects import roles

SCHEMA = Schema(
    id="projectRoleTemplateBinding",
    plural="projectRoleTemplateBindings",
    fields={
        "projectId": Field("reference[project]", create=True, required=True),
        "userId": Field("reference[user]", create=True, required=True),
        "roleTemplateId": Field(
            "enum", create=True, required=True, options=tuple(roles.PROJECT_ROLES)
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
        "projectId": spec.get("projectName", ""),
        "userId": spec.get("userName", ""),
        "roleTemplateId": spec.get("roleTemplateName", ""),
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(obj))


def visible(request: web.Request) -> Obj:
    binding = ScopedId.parse_or_none(request.match_info["id"])
    obj = request.app[STORES].project_bindings.get(binding.key) if binding else None
    project = ((obj or {}).get("spec") or {}).get("projectName", "")
    if obj is None or access(request).project_role(project) is None:
        raise errors.not_found(f"projectRoleTemplateBinding {request.match_info['id']} not found")
    return obj


def grant(
    request: web.Request,
    body: dict[str, Any],
    catalog: dict[str, roles.RoleTemplate],
    existing: list[Obj],
    where: str,
) -> tuple[str, str]:
    """(user id, role) of a new binding, checked: a known user, a role of `catalog`, and not
    a grant the user already has among `existing`."""
    user = either(body, ("userId", "userName"), 253)
    if request.app[STORES].user_active(user) is None:
        raise errors.invalid("userId", f"user {user} not found", "InvalidReference")
    role = either(body, ("roleTemplateId", "roleTemplateName"), 64)
    if role not in catalog:
        raise errors.invalid(
            "roleTemplateId", f"roleTemplateId must be one of {', '.join(catalog)}", "InvalidOption"
        )
    for binding in existing:
        spec = binding.get("spec") or {}
        if spec.get("userName") == user and spec.get("roleTemplateName") == role:
            raise errors.conflict(f"{user} already has {role} in {where}")
    return user, role


@routes.get(v3("projectroletemplatebindings"))
async def list_bindings(request: web.Request) -> web.Response:
    allowed, stores = access(request), request.app[STORES]
    project = request.query.get("projectId")
    objs = stores.project_bindings.by_index("project", project) if project else (
        stores.project_bindings.all()
    )  # fmt: skip
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        (
            o
            for o in objs
            if allowed.project_role((o.get("spec") or {}).get("projectName", "")) is not None
        ),
        binding_id,
        fields,
        lambda o: render(request, o),
        request.query,
        request.path,
        can_create=True,
    )
    return web.json_response(body)


@routes.get(v3("projectroletemplatebindings", "/{id}"))
async def get_binding(request: web.Request) -> web.Response:
    return web.json_response(render(request, visible(request)))


@routes.post(v3("projectroletemplatebindings"))
async def create_binding(request: web.Request) -> web.Response:
    body = await read_json(request)
    if body.get("type", "projectRoleTemplateBinding") != "projectRoleTemplateBinding":
        raise errors.invalid("type", "type must be projectRoleTemplateBinding")
    project_id = either(body, ("projectId", "projectName"), 127)
    referenced(lambda: visible_project(request, project_id), "projectId", f"project {project_id}")
    stores = request.app[STORES]
    existing = stores.project_bindings.by_index("project", project_id)
    user, role = grant(request, body, roles.PROJECT_ROLES, existing, f"project {project_id}")
    owned_project(request, project_id, "grant roles in it")
    project = ScopedId.parse(project_id, "projectId")
    namespace = names.backing_namespace(project.namespace, project.name)
    kube = request.app[KUBE]
    labels = names.backing_namespace_labels(project.namespace, project.name)
    await ensure_namespace(kube, namespace, labels)
    binding = kinds.ProjectRoleTemplateBinding(
        metadata=ObjectMeta(name=roles.project_binding_name(user, role), namespace=namespace),
        spec={"projectName": project_id, "userName": user, "roleTemplateName": role},
    )
    created = await create_once(request, binding, f"{user} already has {role} in {project_id}")
    stores.project_bindings.put(created)
    return web.json_response(render(request, created), status=201)


async def create_once(request: web.Request, binding: Any, taken: str) -> Obj:
    """Create a binding under its derived name: of two identical grants sent at once,
    Kubernetes refuses the second, which a look at the cache before could not."""
    try:
        return as_dict(await request.app[KUBE].create(binding))
    except KubeApiError as exc:
        if exc.status.code == 409:
            raise errors.conflict(taken) from None
        raise


@routes.delete(v3("projectroletemplatebindings", "/{id}"))
async def delete_binding(request: web.Request) -> web.Response:
    obj = visible(request)
    owned_project(request, obj["spec"]["projectName"], "revoke roles in it")
    meta = obj["metadata"]
    await delete_if_present(
        request.app[KUBE], kinds.ProjectRoleTemplateBinding, meta["name"], meta["namespace"]
    )
    request.app[STORES].project_bindings.forget(f"{meta['namespace']}/{meta['name']}")
    return web.Response(status=204)
