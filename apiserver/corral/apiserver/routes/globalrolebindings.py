"""`/v3/globalrolebindings`: who is an administrator. Admins manage them; a user sees their own."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authn import Principal, principal
from corral.apiserver.auth.authz import require_admin
from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import read_json, text
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import meta_fields, name_of
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.http.urls import v3
from corral.core import errors
from corral.core.api import ids
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

ROLES = ("admin", "user")
SCHEMA = Schema(
    id="globalRoleBinding",
    plural="globalRoleBindings",
    fields={
        "globalRoleId": Field("enum", create=True, required=True, options=ROLES),
        "userId": Field("reference[user]", create=True, required=True),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET", "POST"),
)

routes = web.RouteTableDef()


def fields(obj: Obj) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    spec = obj.get("spec", {})
    return {**meta_fields(obj), "globalRoleId": spec.get("globalRoleName", ""),
            "userId": spec.get("userName", "")}  # fmt: skip


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(obj))


def visible(request: web.Request, who: Principal) -> Obj:
    name = request.match_info["id"]
    obj = request.app[DEPS].stores.bindings.get(name)
    if obj is None or (not who.is_admin and obj["spec"].get("userName") != who.user_id):
        raise errors.not_found(f"globalRoleBinding {name} not found")
    return obj


@routes.get(v3("globalrolebindings"))
async def list_bindings(request: web.Request) -> web.Response:
    who = principal(request)
    stores = request.app[DEPS].stores
    objs = stores.bindings.all() if who.is_admin else stores.bindings.by_index("user", who.user_id)
    body = envelope.collection(base_url(request), SCHEMA, objs, name_of, fields,
                               lambda o: render(request, o), request.query, request.path,
                               can_create=who.is_admin)  # fmt: skip
    return web.json_response(body)


@routes.get(v3("globalrolebindings", "/{id}"))
async def get_binding(request: web.Request) -> web.Response:
    return web.json_response(render(request, visible(request, principal(request))))


@routes.post(v3("globalrolebindings"))
async def create_binding(request: web.Request) -> web.Response:
    who = principal(request)
    require_admin(who, "grant global roles")
    body = SCHEMA.writable(await read_json(request), creating=True)
    role = text(body, "globalRoleId", required=True)
    if role not in ROLES:
        raise errors.invalid("globalRoleId", f"globalRoleId must be one of {', '.join(ROLES)}",
                             code="InvalidOption")  # fmt: skip
    user_id = text(body, "userId", max_length=253, required=True)
    stores = request.app[DEPS].stores
    if stores.user_active(user_id) is None:
        raise errors.invalid("userId", f"user {user_id} not found", code="InvalidReference")
    binding = await request.app[DEPS].kube.create(kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ids.generate("grb")),
        spec={"globalRoleName": role, "userName": user_id},
    ))  # fmt: skip
    obj = as_dict(binding)
    stores.bindings.put(obj)
    return web.json_response(render(request, obj), status=201)


@routes.delete(v3("globalrolebindings", "/{id}"))
async def delete_binding(request: web.Request) -> web.Response:
    who = principal(request)
    obj = visible(request, who)
    require_admin(who, "revoke global roles")
    spec = obj["spec"]
    if spec.get("userName") == who.user_id and spec.get("globalRoleName") == "admin":
        raise ApiError(422, "InvalidAction", "You cannot revoke your own admin role")
    name = obj["metadata"]["name"]
    await delete_if_present(request.app[DEPS].kube, kinds.GlobalRoleBinding, name)
    request.app[DEPS].stores.bindings.forget(name)
    return web.Response(status=204)
