"""Creating a user (the username's claim, the User, its password, its global role) and
setting a password.

A username is claimed before its User is created (`corral.core.kube.usernames`), so two users
created at once with one username cannot both be made. Passwords never touch the User object:
their Argon2id hash lives in the Secret `svc-system/<user id>-password`, owned by the User so
that it goes when the user goes.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import DEPS
from corral.apiserver.services import tokens
from corral.core.api import ids
from corral.core.auth import passwords
from corral.core.kube import kinds, password_secrets, usernames
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj


@dataclass(frozen=True)
class NewUser:
    username: str
    password: str
    display_name: str
    description: str
    enabled: bool
    must_change_password: bool


async def create_user(request: web.Request, new: NewUser) -> Obj:
    """For a free username and a password that meets the policy: the username's claim (before
    the User), the User, its password Secret and its `user` global role binding."""
    kube, stores = request.app[DEPS].kube, request.app[DEPS].stores
    if stores.user_by_username(new.username) is not None:
        raise usernames.UsernameTaken
    passwords.check_policy(new.username, new.password)
    user_id = ids.generate("u")
    await usernames.claim(kube, new.username, user_id)
    spec = {"username": new.username, "displayName": new.display_name,
            "description": new.description, "enabled": new.enabled,
            "mustChangePassword": new.must_change_password}  # fmt: skip
    try:
        created = await kube.create(kinds.User(metadata=ObjectMeta(name=user_id), spec=spec))
    except Exception:
        await usernames.release(kube, new.username, user_id)
        raise
    user = as_dict(created)
    stores.users.put(user)
    await usernames.own(kube, new.username, user_id, user["metadata"]["uid"])
    await password_secrets.store(
        kube, user["metadata"]["name"], user["metadata"]["uid"], new.password
    )
    binding = await kube.create(kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ids.generate("grb")),
        spec={"globalRoleName": "user", "userName": user["metadata"]["name"]},
    ))  # fmt: skip
    stores.bindings.put(as_dict(binding))
    return user


async def set_password(request: web.Request, user: Obj, password: str, keep: str) -> None:
    """A password that meets the policy; it ends the user's login sessions but `keep`."""
    passwords.check_policy(user["spec"]["username"], password)
    meta = user["metadata"]
    await password_secrets.store(request.app[DEPS].kube, meta["name"], meta["uid"], password)
    await tokens.end_sessions(request, meta["name"], keep)
