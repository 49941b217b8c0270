"""Global roles: who is an administrator. Only administrators grant and revoke them."""

from __future__ import annotations

from typing import Any

from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authz import Caller, require_admin
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import text
from corral.core import errors
from corral.core.api import ids
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

ROLES = ("admin", "user")


def sees(who: Caller, binding: Obj) -> bool:
    """Administrators see every binding; a user sees their own."""
    return who.is_admin or binding["spec"].get("userName") == who.user_id


def visible(deps: Deps, who: Caller) -> list[Obj]:
    bindings = deps.stores.bindings
    return bindings.all() if who.is_admin else bindings.by_index("user", who.user_id)


def may_grant(who: Caller) -> None:
    require_admin(who, "grant global roles")


async def grant(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    may_grant(who)
    role = text(body, "globalRoleId", required=True)
    if role not in ROLES:
        raise errors.invalid("globalRoleId", f"globalRoleId must be one of {', '.join(ROLES)}",
                             code="InvalidOption")  # fmt: skip
    user_id = text(body, "userId", max_length=253, required=True)
    if deps.stores.user_active(user_id) is None:
        raise errors.invalid("userId", f"user {user_id} not found", code="InvalidReference")
    binding = await deps.kube.create(kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ids.generate("grb")),
        spec={"globalRoleName": role, "userName": user_id},
    ))  # fmt: skip
    obj = as_dict(binding)
    deps.stores.bindings.put(obj)
    return obj


def may_revoke(who: Caller, binding: Obj) -> None:
    require_admin(who, "revoke global roles")
    spec = binding["spec"]
    if spec.get("userName") == who.user_id and spec.get("globalRoleName") == "admin":
        raise errors.Invalid("You cannot revoke your own admin role", code="InvalidAction")


async def revoke(deps: Deps, who: Caller, binding: Obj) -> None:
    may_revoke(who, binding)
    name = binding["metadata"]["name"]
    await delete_if_present(deps.kube, kinds.GlobalRoleBinding, name)
    deps.stores.bindings.forget(name)
