"""`/v3/globalrolebindings`: who is an administrator. Admins manage them; a user sees their own."""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.objects import meta_fields
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import globalroles
from corral.core.kube.informer import Obj

SCHEMA = Schema(
    id="globalRoleBinding",
    plural="globalRoleBindings",
    fields={
        "globalRoleId": Field("enum", create=True, required=True, options=globalroles.ROLES),
        "userId": Field("reference[user]", create=True, required=True),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET", "POST"),
)


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    spec = obj.get("spec", {})
    return {**meta_fields(obj), "globalRoleId": spec.get("globalRoleName", ""),
            "userId": spec.get("userName", "")}  # fmt: skip


def find(ask: Ask, name: str) -> Obj | None:
    obj = ask.deps.stores.bindings.get(name)
    return obj if obj is not None and globalroles.sees(ask.who, obj) else None


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: globalroles.visible(ask.deps, ask.who),
    find=find,
    fields=fields,
    before_create=lambda ask: globalroles.may_grant(ask.who),
    before_delete=lambda ask, obj: globalroles.may_revoke(ask.who, obj),
    create=lambda ask, body: globalroles.grant(ask.deps, ask.who, body),
    delete=lambda ask, obj: globalroles.revoke(ask.deps, ask.who, obj),
)
routes = handlers.routes(FAMILY)
