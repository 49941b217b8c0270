"""Local users: who sees which, creating one (the username's claim, the User, its password,
its global role), changing and deleting one, and setting a password.

A username is claimed before its User is created (`corral.core.kube.usernames`), so two users
created at once with one username cannot both be made. Passwords never touch the User object:
their Argon2id hash lives in the Secret `svc-system/<user id>-password`, owned by the User so
that it goes when the user goes.
"""

from __future__ import annotations

from typing import Any

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller, require_admin
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, flag, name_text, text
from corral.apiserver.services import tokens
from corral.core import errors
from corral.core.api import ids, names
from corral.core.auth import passwords
from corral.core.kube import kinds, password_secrets, usernames
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

MAX_PASSWORD = 1024


def listed(deps: Deps, who: Caller) -> list[Obj]:
    """Administrators see every user; a user sees only themselves."""
    users = deps.stores.users.all()
    return [u for u in users if who.is_admin or u["metadata"]["name"] == who.user_id]


def find(deps: Deps, who: Caller, user_id: str) -> Obj | None:
    if user_id != who.user_id and not who.is_admin:
        return None
    return deps.stores.users.get(user_id)


def may_create(who: Caller) -> None:
    require_admin(who, "create users")


def may_change(who: Caller) -> None:
    require_admin(who, "change users")


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    """For a free username and a password that meets the policy: the username's claim (before
    the User), the User, its password Secret and its `user` global role binding."""
    may_create(who)
    username = name_text(body, "username", max_length=63, required=True)
    password = text(body, "password", max_length=MAX_PASSWORD, required=True)
    spec = {"username": username, "displayName": name_text(body, "name"),
            "description": description_text(body), "enabled": flag(body, "enabled", True),
            "mustChangePassword": flag(body, "mustChangePassword", False)}  # fmt: skip
    kube, stores = deps.kube, deps.stores
    if stores.user_by_username(username) is not None:
        raise usernames.UsernameTaken
    passwords.check_policy(username, password)
    user_id = ids.generate("u")
    await usernames.claim(kube, username, user_id)
    # The operator's finalizer from the start: a user deleted before the operator first saw
    # it still has its tokens and grants removed.
    meta = ObjectMeta(name=user_id, finalizers=[names.FINALIZER_OPERATOR])
    try:
        created = await kube.create(kinds.User(metadata=meta, spec=spec))
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


async def update(deps: Deps, who: Caller, user: Obj, body: dict[str, Any]) -> Obj:
    """The display name, description, whether the user is enabled and must change their
    password; an administrator cannot disable themselves."""
    may_change(who)
    patch: dict[str, Any] = {}
    if "name" in body:
        patch["displayName"] = name_text(body, "name")
    if "description" in body:
        patch["description"] = description_text(body)
    if "enabled" in body:
        patch["enabled"] = flag(body, "enabled", True)
        if not patch["enabled"] and user["metadata"]["name"] == who.user_id:
            raise errors.Invalid("You cannot deactivate yourself", code="InvalidAction")
    if "mustChangePassword" in body:
        patch["mustChangePassword"] = flag(body, "mustChangePassword", False)
    if not patch:
        return user
    updated = await deps.kube.patch(
        kinds.User, user["metadata"]["name"], {"spec": patch}, patch_type=PatchType.MERGE
    )
    obj = as_dict(updated)
    deps.stores.users.put(obj)
    return obj


def may_delete(who: Caller, user: Obj) -> None:
    require_admin(who, "delete users")
    if user["metadata"]["name"] == who.user_id:
        raise errors.Invalid("You cannot delete yourself", code="InvalidAction")


async def delete(deps: Deps, who: Caller, user: Obj) -> None:
    """Deleting a user deletes their tokens and bindings too (the operator finishes that)."""
    may_delete(who, user)
    user_id = user["metadata"]["name"]
    await delete_if_present(deps.kube, kinds.User, user_id)
    deps.stores.users.forget(user_id)


def may_set_password(who: Caller, user: Obj) -> None:
    """Administrators set the passwords of local users; one who signs in through a provider
    has none."""
    require_admin(who, "set passwords")
    if not user["spec"].get("username"):
        raise errors.Invalid("this user signs in through a provider", code="InvalidAction")


async def reset_password(deps: Deps, who: Caller, user: Obj, body: dict[str, Any]) -> None:
    """An administrator's `setpassword`: every login session of the user ends."""
    may_set_password(who, user)
    new = text(body, "newPassword", max_length=MAX_PASSWORD, required=True)
    await set_password(deps, user, new, keep="")


async def change_password(deps: Deps, who: Caller, body: dict[str, Any]) -> None:
    """A user changes their own password, proving the current one; their other login
    sessions end, this one stays."""
    current = text(body, "currentPassword", max_length=MAX_PASSWORD, required=True)
    new = text(body, "newPassword", max_length=MAX_PASSWORD, required=True)
    user = deps.stores.users.get(who.user_id)
    if user is None:
        raise errors.not_found("user not found")
    if not await password_secrets.verify(deps.kube, who.user_id, current):
        raise errors.invalid("currentPassword", "current password is wrong",
                             code="InvalidBodyContent")  # fmt: skip
    await set_password(deps, user, new, keep=who.principal.token.name)


async def set_password(deps: Deps, user: Obj, password: str, keep: str) -> None:
    """A password that meets the policy; it ends the user's login sessions but `keep`."""
    passwords.check_policy(user["spec"]["username"], password)
    meta = user["metadata"]
    await password_secrets.store(deps.kube, meta["name"], meta["uid"], password)
    await tokens.end_sessions(deps, meta["name"], keep)
