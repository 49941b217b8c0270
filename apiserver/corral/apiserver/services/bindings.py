"""Granting roles in clusters and projects: who sees a grant, checking one, creating its
binding once, and revoking it.

A grant names a user (`userId`) or a provider's group (`groupPrincipalId`,
`oidc_group://<name>`), never both (Rancher's rule and message). A binding's name is derived
from its subject and role (`roles.cluster_binding_name`, `roles.project_binding_name`), so
Kubernetes refuses a second binding of one grant, on any replica, where a look at the cache
before creating could race. The two kinds differ only in what they are granted in
(`Target`): `CLUSTER` and `PROJECT`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import either, referenced, text
from corral.apiserver.services.visibility import (
    require_cluster_owner,
    require_project_owner,
    settle_cluster,
    settle_project,
    visible_cluster,
    visible_project,
)
from corral.apiserver.state.stores import Stores
from corral.core import errors
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.auth import principals
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Informer, Obj
from corral.core.projects import roles

log = logging.getLogger(__name__)

SUBJECT_RULE = (
    "must target a user [userId]/[userPrincipalId] OR a group [groupId]/[groupPrincipalId]"
)


@dataclass(frozen=True)
class Target:
    """What one kind of binding grants roles in: its wire names come from `noun`
    (`clusterId`, and the stored name `clusterName`, an alias on the wire)."""

    noun: str
    catalog: Mapping[str, roles.RoleTemplate]
    max_length: int  # of a target's id
    kind: Any  # the custom resource's lightkube class
    stored: Callable[[Stores], Informer]
    of: Callable[[Obj], str]  # the target a binding is in
    role: Callable[[Access, str], str | None]  # the caller's role in a target
    visible: Callable[[Deps, Caller, str], Obj]
    settle: Callable[[Deps, Caller, str], Awaitable[None]]
    # 403 unless the caller administers a target they see.
    require_owner: Callable[[Caller, str, str], None]
    # The namespace a target's bindings live in, with its labels.
    home: Callable[[str], tuple[str, dict[str, str]]]
    binding_name: Callable[[str, str], str]
    # How the refusal of a second identical binding names the target.
    spoken: Callable[[str], str]

    @property
    def field(self) -> str:
        return f"{self.noun}Id"

    @property
    def stored_field(self) -> str:
        return f"{self.noun}Name"


def _project_home(pid: str) -> tuple[str, dict[str, str]]:
    project = ScopedId.parse(pid, "projectId")
    return (
        names.backing_namespace(project.namespace, project.name),
        names.backing_namespace_labels(project.namespace, project.name),
    )


CLUSTER = Target(
    noun="cluster",
    catalog=roles.CLUSTER_ROLES,
    max_length=63,
    kind=kinds.ClusterRoleTemplateBinding,
    stored=lambda stores: stores.cluster_bindings,
    of=lambda binding: str(binding["metadata"]["namespace"]),
    role=Access.cluster_role,
    visible=visible_cluster,
    settle=settle_cluster,
    require_owner=require_cluster_owner,
    home=lambda cluster: (cluster, {names.LABEL_CLUSTER: cluster}),
    binding_name=roles.cluster_binding_name,
    spoken=lambda cluster: f"cluster {cluster}",
)
PROJECT = Target(
    noun="project",
    catalog=roles.PROJECT_ROLES,
    max_length=127,
    kind=kinds.ProjectRoleTemplateBinding,
    stored=lambda stores: stores.project_bindings,
    of=lambda binding: str((binding.get("spec") or {}).get("projectName", "")),
    role=Access.project_role,
    visible=visible_project,
    settle=settle_project,
    require_owner=require_project_owner,
    home=_project_home,
    binding_name=roles.project_binding_name,
    spoken=str,
)


@dataclass(frozen=True)
class Grant:
    subject: str  # a user id, or a group principal
    is_group: bool
    role: str

    def spec(self) -> dict[str, str]:
        key = "groupPrincipalName" if self.is_group else "userName"
        return {key: self.subject, "roleTemplateName": self.role}


def subject_of(binding: Obj) -> str:
    spec = binding.get("spec") or {}
    return str(spec.get("userName") or spec.get("groupPrincipalName") or "")


def sees(who: Caller, target: Target, binding: Obj) -> bool:
    """Everyone with a role in the cluster or project sees its bindings."""
    return target.role(who.access, target.of(binding)) is not None


def visible(deps: Deps, who: Caller, target: Target, within: str | None) -> list[Obj]:
    """The bindings the caller sees, of one cluster or project when `within` names one."""
    store = target.stored(deps.stores)
    found = store.by_index(target.noun, within) if within else store.all()
    return [binding for binding in found if sees(who, target, binding)]


def find(deps: Deps, who: Caller, target: Target, binding_id: str) -> Obj | None:
    """The binding `<namespace>:<name>`, if the caller sees it."""
    wanted = ScopedId.parse_or_none(binding_id)
    obj = target.stored(deps.stores).get(wanted.key) if wanted else None
    return obj if obj is not None and sees(who, target, obj) else None


async def grant(deps: Deps, who: Caller, target: Target, body: dict[str, Any]) -> Obj:
    """The binding a body asks for: the target referenced, the grant checked (422, and 409
    for a grant the subject has), then 403 unless the caller owns the target."""
    type_id = f"{target.noun}RoleTemplateBinding"
    if body.get("type", type_id) != type_id:
        raise errors.invalid("type", f"type must be {type_id}")
    where = either(body, (target.field, target.stored_field), target.max_length)
    await target.settle(deps, who, where)
    referenced(lambda: target.visible(deps, who, where), target.field, f"{target.noun} {where}")
    existing = target.stored(deps.stores).by_index(target.noun, where)
    new = checked(deps, body, target.catalog, existing, f"{target.noun} {where}")
    target.require_owner(who, where, "grant roles in it")
    namespace, labels = target.home(where)
    await ensure_namespace(deps.kube, namespace, labels)
    binding = target.kind(
        metadata=ObjectMeta(name=target.binding_name(new.subject, new.role), namespace=namespace),
        spec={target.stored_field: where, **new.spec()},
    )
    created = await _create_once(
        deps, binding, f"{new.subject} already has {new.role} in {target.spoken(where)}"
    )
    target.stored(deps.stores).put(created)
    return created


def may_revoke(who: Caller, target: Target, binding: Obj) -> None:
    """A binding the caller sees is theirs to remove when they own its cluster or project."""
    target.require_owner(who, target.of(binding), "revoke roles in it")


async def revoke(deps: Deps, who: Caller, target: Target, binding: Obj) -> None:
    may_revoke(who, target, binding)
    meta = binding["metadata"]
    await delete_if_present(deps.kube, target.kind, meta["name"], meta["namespace"])
    target.stored(deps.stores).forget(f"{meta['namespace']}/{meta['name']}")


def checked(
    deps: Deps,
    body: dict[str, Any],
    catalog: Mapping[str, roles.RoleTemplate],
    existing: list[Obj],
    where: str,
) -> Grant:
    """The grant a new binding makes, checked: a known user or a well-formed group, a role of
    `catalog`, and not a grant the subject already has among `existing`."""
    user = text(body, "userId", 253) or text(body, "userName", 253)
    group = text(body, "groupPrincipalId", 300) or text(body, "groupPrincipalName", 300)
    if bool(user) == bool(group):
        raise errors.invalid("userId" if user else "groupPrincipalId", SUBJECT_RULE,
                             "InvalidBodyContent")  # fmt: skip
    if group:
        principals.check_group_principal(group)
    elif deps.stores.user_active(user) is None:
        raise errors.invalid("userId", f"user {user} not found", "InvalidReference")
    role = either(body, ("roleTemplateId", "roleTemplateName"), 64)
    if role not in catalog:
        raise errors.invalid(
            "roleTemplateId", f"roleTemplateId must be one of {', '.join(catalog)}", "InvalidOption"
        )
    subject = group or user
    for binding in existing:
        if subject_of(binding) == subject and binding["spec"].get("roleTemplateName") == role:
            raise errors.conflict(f"{subject} already has {role} in {where}")
    return Grant(subject, bool(group), role)


async def bind_creator(deps: Deps, project: Obj, user_id: str) -> None:
    """The creator owns the project from the first answer on: the API makes the binding the
    operator would make (under the same name, so only one of them can) and reads its own
    write. Should this fail, the operator makes it on its next pass."""
    cluster, name = project["metadata"]["namespace"], project["metadata"]["name"]
    pid = str(ScopedId.of(project))
    binding_name = roles.project_binding_name(user_id, roles.PROJECT_OWNER)
    namespace = names.backing_namespace(cluster, name)
    binding = kinds.ProjectRoleTemplateBinding(
        metadata=ObjectMeta(name=binding_name, namespace=namespace),
        spec={"projectName": pid, "userName": user_id, "roleTemplateName": roles.PROJECT_OWNER},
    )
    try:
        created = await deps.kube.create(binding)
    except KubeApiError as exc:
        if exc.status.code != 409:
            log.warning("project %s: cannot bind its creator: %s", pid, exc)
            return
        created = await deps.kube.get(
            kinds.ProjectRoleTemplateBinding, binding_name, namespace=namespace
        )
    deps.stores.project_bindings.put(as_dict(created))


async def _create_once(deps: Deps, binding: Any, taken: str) -> Obj:
    """Create a binding under its derived name: of two identical grants sent at once,
    Kubernetes refuses the second, which a look at the cache before could not."""
    try:
        return as_dict(await deps.kube.create(binding))
    except KubeApiError as exc:
        if exc.status.code == 409:
            raise errors.conflict(taken) from None
        raise
