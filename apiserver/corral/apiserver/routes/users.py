"""`/v3/users`: local users. Admins manage everyone; a user sees only themselves.

How a user and a password are stored: `services.users`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.types import PatchType

from corral.apiserver.auth.authn import Principal, principal
from corral.apiserver.auth.authz import require_admin
from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import (
    AUTH_LIMIT,
    description_text,
    flag,
    name_text,
    read_json,
    text,
)
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import meta_fields, name_of
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import users
from corral.core import errors
from corral.core.kube import kinds, password_secrets
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

SCHEMA = Schema(
    id="user",
    plural="users",
    fields={
        "username": Field("string", create=True, required=True),
        "password": Field("password", create=True, write_only=True, required=True),
        "name": Field("string", create=True, update=True, description="Display name"),
        "description": Field("string", create=True, update=True),
        "enabled": Field("boolean", create=True, update=True, default=True),
        "mustChangePassword": Field("boolean", create=True, update=True, default=False),
        "principalIds": readonly("array[string]"),
        "me": readonly("boolean", "True for the calling user"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={"setpassword": {"input": "setPasswordInput"}},
    collection_actions={"changepassword": {"input": "changePasswordInput"}},
)
SET_PASSWORD = Schema(
    id="setPasswordInput", plural="setPasswordInputs", embedded=True,
    fields={"newPassword": Field("password", create=True, required=True)},
)  # fmt: skip
CHANGE_PASSWORD = Schema(
    id="changePasswordInput", plural="changePasswordInputs", embedded=True,
    fields={"currentPassword": Field("password", create=True, required=True),
            "newPassword": Field("password", create=True, required=True)},
)  # fmt: skip

routes = web.RouteTableDef()


def fields(obj: Obj, who: Principal) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    spec = obj.get("spec", {})
    return {
        **meta_fields(obj),
        "username": spec.get("username", ""),
        "name": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "enabled": spec.get("enabled", True),
        "mustChangePassword": spec.get("mustChangePassword", False),
        "principalIds": spec.get("principalIds") or [f"local://{obj['metadata']['name']}"],
        "me": obj["metadata"]["name"] == who.user_id,
    }


def render(request: web.Request, obj: Obj, who: Principal) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(obj, who),
                             actions=["setpassword"] if who.is_admin else [])  # fmt: skip


def visible_user(request: web.Request, who: Principal) -> Obj:
    user_id = request.match_info["id"]
    obj = request.app[DEPS].stores.users.get(user_id)
    if obj is None or (user_id != who.user_id and not who.is_admin):
        raise errors.not_found(f"user {user_id} not found")
    return obj


@routes.get(v3("users"))
async def list_users(request: web.Request) -> web.Response:
    who = principal(request)
    users = request.app[DEPS].stores.users.all()
    visible = [u for u in users if who.is_admin or u["metadata"]["name"] == who.user_id]
    body = envelope.collection(base_url(request), SCHEMA, visible, name_of,
                               lambda u: fields(u, who), lambda u: render(request, u, who),
                               request.query, request.path, can_create=who.is_admin)  # fmt: skip
    return web.json_response(body)


@routes.get(v3("users", "/{id}"))
async def get_user(request: web.Request) -> web.Response:
    who = principal(request)
    return web.json_response(render(request, visible_user(request, who), who))


@routes.post(v3("users"))
async def create_or_act(request: web.Request) -> web.Response:
    if action(request, {"changepassword"}) == "changepassword":
        return await change_password(request)
    who = principal(request)
    require_admin(who, "create users")
    body = SCHEMA.writable(await read_json(request, AUTH_LIMIT), creating=True)
    username = name_text(body, "username", max_length=63, required=True)
    password = text(body, "password", max_length=1024, required=True)
    display = name_text(body, "name")
    description = description_text(body)
    enabled = flag(body, "enabled", True)
    must_change = flag(body, "mustChangePassword", False)
    user = await users.create_user(request, users.NewUser(
        username, password, display, description, enabled, must_change
    ))  # fmt: skip
    return web.json_response(render(request, user, who), status=201)


@routes.put(v3("users", "/{id}"))
async def update_user(request: web.Request) -> web.Response:
    who = principal(request)
    obj = visible_user(request, who)
    require_admin(who, "change users")
    body = SCHEMA.writable(await read_json(request), creating=False)
    patch: dict[str, Any] = {}
    if "name" in body:
        patch["displayName"] = name_text(body, "name")
    if "description" in body:
        patch["description"] = description_text(body)
    if "enabled" in body:
        patch["enabled"] = flag(body, "enabled", True)
        if not patch["enabled"] and obj["metadata"]["name"] == who.user_id:
            raise ApiError(422, "InvalidAction", "You cannot deactivate yourself")
    if "mustChangePassword" in body:
        patch["mustChangePassword"] = flag(body, "mustChangePassword", False)
    if patch:
        updated = await request.app[DEPS].kube.patch(
            kinds.User, obj["metadata"]["name"], {"spec": patch},
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        obj = as_dict(updated)
        request.app[DEPS].stores.users.put(obj)
    return web.json_response(render(request, obj, who))


@routes.delete(v3("users", "/{id}"))
async def delete_user(request: web.Request) -> web.Response:
    """Deleting a user deletes their tokens and bindings too (the operator finishes that)."""
    who = principal(request)
    obj = visible_user(request, who)
    require_admin(who, "delete users")
    user_id = obj["metadata"]["name"]
    if user_id == who.user_id:
        raise ApiError(422, "InvalidAction", "You cannot delete yourself")
    await delete_if_present(request.app[DEPS].kube, kinds.User, user_id)
    request.app[DEPS].stores.users.forget(user_id)
    return web.Response(status=204)


@routes.post(v3("users", "/{id}"))
async def user_action(request: web.Request) -> web.Response:
    who = principal(request)
    obj = visible_user(request, who)
    if action(request, {"setpassword"}) is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a user needs ?action=setpassword")
    require_admin(who, "set passwords")
    if not obj["spec"].get("username"):
        raise ApiError(422, "InvalidAction", "this user signs in through a provider")
    body = await read_json(request, AUTH_LIMIT)
    new = text(body, "newPassword", max_length=1024, required=True)
    await users.set_password(request, obj, new, keep="")
    return web.json_response(render(request, obj, who))


async def change_password(request: web.Request) -> web.Response:
    """A user changes their own password, proving the current one."""
    who = principal(request)
    body = await read_json(request, AUTH_LIMIT)
    current = text(body, "currentPassword", max_length=1024, required=True)
    new = text(body, "newPassword", max_length=1024, required=True)
    obj = request.app[DEPS].stores.users.get(who.user_id)
    if obj is None:
        raise errors.not_found("user not found")
    if not await password_secrets.verify(request.app[DEPS].kube, who.user_id, current):
        raise errors.invalid("currentPassword", "current password is wrong",
                             code="InvalidBodyContent")  # fmt: skip
    await users.set_password(request, obj, new, keep=who.token.name)
    return web.json_response({}, status=200)
