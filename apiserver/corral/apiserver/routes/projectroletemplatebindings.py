"""`/v3/projectroletemplatebindings` (spec 2.10, 4.6): who has which role in a project: a
user (`userId`) or every member of a provider's group (`groupPrincipalId`).

A binding lives in its project's backing namespace; its id is `<namespace>:<name>`, the name
derived from subject and role (`roles.project_binding_name`), so one grant exists only once.
Project owners (and cluster owners, and administrators) grant and revoke; everyone with a role
in the project sees its bindings. The operator turns each into RoleBindings in every namespace
of the project downstream. Bindings are immutable: replace one to change it.
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
from corral.apiserver.services.visibility import owned_project, visible_project
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj
from corral.core.projects import roles

SCHEMA = Schema(
    id="projectRoleTemplateBinding",
    plural="projectRoleTemplateBindings",
    fields={
        "projectId": Field("reference[project]", create=True, required=True),
        "userId": Field("reference[user]", create=True),
        "groupPrincipalId": Field(
            "reference[principal]", create=True, description="oidc_group://<group>, not with userId"
        ),
        "roleTemplateId": Field(
            "enum", create=True, required=True, options=tuple(roles.PROJECT_ROLES)
        ),
        # The create fields of spec 2.10, shown back with the same values.
        "projectName": Field("reference[project]", create=True, description="Alias of projectId"),
        "userName": Field("reference[user]", create=True, description="Alias of userId"),
        "roleTemplateName": Field(
            "enum",
            create=True,
            options=tuple(roles.PROJECT_ROLES),
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
        "projectId": spec.get("projectName", ""),
        "userId": spec.get("userName", ""),
        "groupPrincipalId": spec.get("groupPrincipalName", ""),
        "roleTemplateId": spec.get("roleTemplateName", ""),
        "projectName": spec.get("projectName", ""),
        "userName": spec.get("userName", ""),
        "roleTemplateName": spec.get("roleTemplateName", ""),
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(obj))


def visible(request: web.Request) -> Obj:
    binding = ScopedId.parse_or_none(request.match_info["id"])
    obj = request.app[DEPS].stores.project_bindings.get(binding.key) if binding else None
    project = ((obj or {}).get("spec") or {}).get("projectName", "")
    if obj is None or access(request).project_role(project) is None:
        raise errors.not_found(f"projectRoleTemplateBinding {request.match_info['id']} not found")
    return obj


@routes.get(v3("projectroletemplatebindings"))
async def list_bindings(request: web.Request) -> web.Response:
    allowed, stores = access(request), request.app[DEPS].stores
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
    referenced(
        lambda: visible_project(deps(request), caller(request), project_id),
        "projectId",
        f"project {project_id}",
    )
    existing = request.app[DEPS].stores.project_bindings.by_index("project", project_id)
    new = bindings.grant(request, body, roles.PROJECT_ROLES, existing, f"project {project_id}")
    owned_project(deps(request), caller(request), project_id, "grant roles in it")
    created = await bindings.bind_in_project(request, project_id, new)
    return web.json_response(render(request, created), status=201)


@routes.delete(v3("projectroletemplatebindings", "/{id}"))
async def delete_binding(request: web.Request) -> web.Response:
    obj = visible(request)
    owned_project(deps(request), caller(request), obj["spec"]["projectName"], "revoke roles in it")
    await bindings.unbind_project(request, obj)
    return web.Response(status=204)
