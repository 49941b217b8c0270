"""The one shape of the two role-binding families, `/v3/clusterroletemplatebindings` and
`/v3/projectroletemplatebindings`: their schema, fields and services differ only in what
roles are granted in (`services.bindings.Target`)."""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.resources.family import Family
from corral.apiserver.resources.subscriptions import Subscribable
from corral.apiserver.services import bindings
from corral.apiserver.services.bindings import Target
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj


def schema(target: Target) -> Schema:
    noun, options = target.noun, tuple(target.catalog)
    return Schema(
        id=f"{noun}RoleTemplateBinding",
        plural=f"{noun}RoleTemplateBindings",
        fields={
            target.field: Field(f"reference[{noun}]", create=True, required=True),
            "userId": Field("reference[user]", create=True),
            "groupPrincipalId": Field(
                "reference[principal]",
                create=True,
                description="oidc_group://<group>, not with userId",
            ),
            "roleTemplateId": Field("enum", create=True, required=True, options=options),
            # The stored names (spec 2.10's create fields), accepted on create and shown back.
            target.stored_field: Field(
                f"reference[{noun}]", create=True, description=f"Alias of {target.field}"
            ),
            "userName": Field("reference[user]", create=True, description="Alias of userId"),
            "groupPrincipalName": Field(
                "reference[principal]",
                create=True,
                write_only=True,
                description="Alias of groupPrincipalId",
            ),
            "roleTemplateName": Field(
                "enum", create=True, options=options, description="Alias of roleTemplateId"
            ),
        },
        resource_methods=("GET", "DELETE"),
        collection_methods=("GET", "POST"),
    )


def fields(target: Target, obj: Obj) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    spec, meta = obj.get("spec") or {}, obj["metadata"]
    where = spec.get(target.stored_field, "")
    return {
        "id": str(ScopedId.of(obj)),
        "name": meta["name"],
        target.field: where,
        "userId": spec.get("userName", ""),
        "groupPrincipalId": spec.get("groupPrincipalName", ""),
        "roleTemplateId": spec.get("roleTemplateName", ""),
        target.stored_field: where,
        "userName": spec.get("userName", ""),
        "roleTemplateName": spec.get("roleTemplateName", ""),
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def subscribable(family: Family[Obj], target: Target, cache: str) -> Subscribable:
    """`GET /v3/subscribe`: a binding's changes go to whoever has a role in its cluster or
    project, as `listed`, judged when the change comes: a subscriber whose own binding is
    removed has no role left to see that removal by."""
    return Subscribable(
        family, cache=cache, sees=lambda ask, obj: bindings.sees(ask.who, target, obj)
    )


def family(target: Target) -> Family[Obj]:
    return Family[Obj](
        schema=schema(target),
        listed=lambda ask: bindings.visible(ask.deps, ask.who, target, ask.query.get(target.field)),
        find=lambda ask, binding_id: bindings.find(ask.deps, ask.who, target, binding_id),
        fields=lambda ask, obj: fields(target, obj),
        ident=lambda obj: str(ScopedId.of(obj)),
        create=lambda ask, body: bindings.grant(ask.deps, ask.who, target, body),
        before_delete=lambda ask, obj: bindings.may_revoke(ask.who, target, obj),
        delete=lambda ask, obj: bindings.revoke(ask.deps, ask.who, target, obj),
        body_as_sent=True,
    )
