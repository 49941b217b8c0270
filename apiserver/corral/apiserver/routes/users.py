"""`/v3/users`: local users. Admins manage everyone; a user sees only themselves.

Passwords never touch the User object: their Argon2id hash lives in the Secret
`svc-system/<user id>-password`, owned by the User so that it goes when the user goes. A
username is claimed before its User is created (`corral.core.kube.usernames`), so two users
created at once with one username cannot both be made.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver import envelope, errors
from corral.apiserver.authn import Principal, principal
from corral.apiserver.authz import require_admin
from corral.apiserver.body import AUTH_LIMIT, read_json
from corral.apiserver.errors import ApiError
from corral.apiserver.keys import KUBE, STORES
from corral.apiserver.routes import tokens
from corral.apiserver.routes.common import action, base_url, flag, meta_fields, name_of, text, v3
from corral.apiserver.schemas import Field, Schema, readonly
from corral.core.api import ids
from corral.core.auth import passwords
from corral.core.auth.tokens import TokenRecord
from corral.core.kube import kinds, password_secrets, usernames
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
        "principalIds": [f"local://{obj['metadata']['name']}"],
        "me": obj["metadata"]["name"] == who.user_id,
    }


def render(request: web.Request, obj: Obj, who: Principal) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(obj, who),
                             actions=["setpassword"] if who.is_admin else [])  # fmt: skip


def visible_user(request: web.Request, who: Principal) -> Obj:
    user_id = request.match_info["id"]
    obj = request.app[STORES].users.get(user_id)
    if obj is None or (user_id != who.user_id and not who.is_admin):
        raise errors.not_found(f"user {user_id} not found")
    return obj


@routes.get(v3("users"))
async def list_users(request: web.Request) -> web.Response:
    who = principal(request)
    users = request.app[STORES].users.all()
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
    username = text(body, "username", max_length=63, required=True)
    password = text(body, "password", max_length=1024, required=True)
    display = text(body, "name", max_length=256)
    description = text(body, "description")
    enabled = flag(body, "enabled", True)
    must_change = flag(body, "mustChangePassword", False)
    if request.app[STORES].user_by_username(username) is not None:
        raise usernames.UsernameTaken
    passwords.check_policy(username, password)
    user = await create_user(request, username, password, display, description, enabled,
                             must_change)  # fmt: skip
    return web.json_response(render(request, user, who), status=201)


async def create_user(
    request: web.Request, username: str, password: str, display: str, description: str,
    enabled: bool, must_change: bool,
) -> Obj:  # fmt: skip
    """The username's claim (before the User: see `usernames`), the User, its password
    Secret and its `user` global role binding."""
    kube, stores = request.app[KUBE], request.app[STORES]
    user_id = ids.generate("u")
    await usernames.claim(kube, username, user_id)
    spec = {"username": username, "displayName": display, "description": description,
            "enabled": enabled, "mustChangePassword": must_change}  # fmt: skip
    try:
        created = await kube.create(kinds.User(metadata=ObjectMeta(name=user_id), spec=spec))
    except Exception:
        await usernames.release(kube, username, user_id)
        raise
    user = as_dict(created)
    stores.users.put(user)
    await usernames.own(kube, username, user_id, user["metadata"]["uid"])
    await password_secrets.store(kube, user["metadata"]["name"], user["metadata"]["uid"], password)
    binding = await kube.create(kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ids.generate("grb")),
        spec={"globalRoleName": "user", "userName": user["metadata"]["name"]},
    ))  # fmt: skip
    stores.bindings.put(as_dict(binding))
    return user


@routes.put(v3("users", "/{id}"))
async def update_user(request: web.Request) -> web.Response:
    who = principal(request)
    obj = visible_user(request, who)
    require_admin(who, "change users")
    body = SCHEMA.writable(await read_json(request), creating=False)
    patch: dict[str, Any] = {}
    if "name" in body:
        patch["displayName"] = text(body, "name", max_length=256)
    if "description" in body:
        patch["description"] = text(body, "description")
    if "enabled" in body:
        patch["enabled"] = flag(body, "enabled", True)
        if not patch["enabled"] and obj["metadata"]["name"] == who.user_id:
            raise ApiError(422, "InvalidAction", "You cannot deactivate yourself")
    if "mustChangePassword" in body:
        patch["mustChangePassword"] = flag(body, "mustChangePassword", False)
    if patch:
        updated = await request.app[KUBE].patch(
            kinds.User, obj["metadata"]["name"], {"spec": patch},
            patch_type=PatchType.MERGE,
        )  # fmt: skip
        obj = as_dict(updated)
        request.app[STORES].users.put(obj)
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
    await delete_if_present(request.app[KUBE], kinds.User, user_id)
    request.app[STORES].users.forget(user_id)
    return web.Response(status=204)


@routes.post(v3("users", "/{id}"))
async def user_action(request: web.Request) -> web.Response:
    who = principal(request)
    obj = visible_user(request, who)
    if action(request, {"setpassword"}) is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a user needs ?action=setpassword")
    require_admin(who, "set passwords")
    body = await read_json(request, AUTH_LIMIT)
    new = text(body, "newPassword", max_length=1024, required=True)
    passwords.check_policy(obj["spec"]["username"], new)
    await password_secrets.store(
        request.app[KUBE], obj["metadata"]["name"], obj["metadata"]["uid"], new
    )
    await end_sessions(request, obj["metadata"]["name"], keep="")
    return web.json_response(render(request, obj, who))


async def change_password(request: web.Request) -> web.Response:
    """A user changes their own password, proving the current one."""
    who = principal(request)
    body = await read_json(request, AUTH_LIMIT)
    current = text(body, "currentPassword", max_length=1024, required=True)
    new = text(body, "newPassword", max_length=1024, required=True)
    obj = request.app[STORES].users.get(who.user_id)
    if obj is None:
        raise errors.not_found("user not found")
    if not await password_secrets.verify(request.app[KUBE], who.user_id, current):
        raise errors.invalid("currentPassword", "current password is wrong",
                             code="InvalidBodyContent")  # fmt: skip
    passwords.check_policy(obj["spec"]["username"], new)
    await password_secrets.store(
        request.app[KUBE], obj["metadata"]["name"], obj["metadata"]["uid"], new
    )
    await end_sessions(request, who.user_id, keep=who.token.name)
    return web.json_response({}, status=200)


async def end_sessions(request: web.Request, user_id: str, keep: str) -> None:
    """A new password ends the user's other login sessions; API tokens stay valid."""
    for obj in request.app[STORES].tokens.by_index("user", user_id):
        record = TokenRecord.from_object(obj)
        if record.is_session and record.name != keep:
            await tokens.delete(request, record.name)
