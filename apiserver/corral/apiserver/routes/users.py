"""`/v3/users`: local users. Admins manage everyone; a user sees only themselves.

How a user and a password are stored: `services.users`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.deps import caller, deps
from corral.apiserver.http.body import AUTH_LIMIT, DEFAULT_LIMIT, read_input
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.objects import meta_fields
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import users
from corral.core import errors
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


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
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
        "me": obj["metadata"]["name"] == ask.who.user_id,
    }


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: users.listed(ask.deps, ask.who),
    find=lambda ask, user_id: users.find(ask.deps, ask.who, user_id),
    fields=fields,
    actions=lambda ask, obj: ["setpassword"],
    before_create=lambda ask: users.may_create(ask.who),
    before_update=lambda ask, obj: users.may_change(ask.who),
    before_delete=lambda ask, obj: users.may_delete(ask.who, obj),
    before_action=lambda ask, obj, name: users.may_set_password(ask.who, obj),
    create=lambda ask, body: users.create(ask.deps, ask.who, body),
    update=lambda ask, obj, body: users.update(ask.deps, ask.who, obj, body),
    delete=lambda ask, obj: users.delete(ask.deps, ask.who, obj),
    # Bodies with passwords are the authentication endpoints'; a PUT carries none.
    body_limit=AUTH_LIMIT,
    update_limit=DEFAULT_LIMIT,
)


async def change_password(request: web.Request) -> web.Response:
    """A user changes their own password, proving the current one."""
    who = caller(request)
    body = await read_input(request, CHANGE_PASSWORD, AUTH_LIMIT)
    await users.change_password(deps(request), who, body)
    return json_response({}, status=200)


routes = handlers.routes(FAMILY, collection_actions={"changepassword": change_password})


@routes.post(v3("users", "/{id}"))
async def user_action(request: web.Request) -> web.Response:
    asked, obj = await handlers.found(FAMILY, request)
    if action(request, {"setpassword"}) is None:
        raise errors.Unsupported("POST on a user needs ?action=setpassword")
    users.may_set_password(asked.who, obj)
    body = await read_input(request, SET_PASSWORD, AUTH_LIMIT)
    await users.reset_password(asked.deps, asked.who, obj, body)
    return json_response(FAMILY.render(asked, obj))
