"""Granting roles in clusters and projects: checking a grant and creating its binding once.

A grant names a user (`userId`) or a provider's group (`groupPrincipalId`,
`oidc_group://<name>`), never both (Rancher's rule and message). A binding's name is derived
from its subject and role (`roles.cluster_binding_name`, `roles.project_binding_name`), so
Kubernetes refuses a second binding of one grant, on any replica, where a look at the cache
before creating could race.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import DEPS
from corral.apiserver.http.body import either, text
from corral.core import errors
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.auth import principals
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.projects import roles

log = logging.getLogger(__name__)

SUBJECT_RULE = (
    "must target a user [userId]/[userPrincipalId] OR a group [groupId]/[groupPrincipalId]"
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


def grant(
    request: web.Request,
    body: dict[str, Any],
    catalog: dict[str, roles.RoleTemplate],
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
    elif request.app[DEPS].stores.user_active(user) is None:
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


async def bind_in_cluster(request: web.Request, cluster: str, new: Grant) -> Obj:
    """The cluster role binding of a checked grant, in the cluster's namespace."""
    await ensure_namespace(request.app[DEPS].kube, cluster, {names.LABEL_CLUSTER: cluster})
    name = roles.cluster_binding_name(new.subject, new.role)
    binding = kinds.ClusterRoleTemplateBinding(
        metadata=ObjectMeta(name=name, namespace=cluster),
        spec={"clusterName": cluster, **new.spec()},
    )
    created = await _create_once(
        request, binding, f"{new.subject} already has {new.role} in cluster {cluster}"
    )
    request.app[DEPS].stores.cluster_bindings.put(created)
    return created


async def bind_in_project(request: web.Request, project_id: str, new: Grant) -> Obj:
    """The project role binding of a checked grant, in the project's backing namespace."""
    project = ScopedId.parse(project_id, "projectId")
    namespace = names.backing_namespace(project.namespace, project.name)
    labels = names.backing_namespace_labels(project.namespace, project.name)
    await ensure_namespace(request.app[DEPS].kube, namespace, labels)
    binding = kinds.ProjectRoleTemplateBinding(
        metadata=ObjectMeta(name=roles.project_binding_name(new.subject, new.role),
                            namespace=namespace),
        spec={"projectName": project_id, **new.spec()},
    )  # fmt: skip
    created = await _create_once(
        request, binding, f"{new.subject} already has {new.role} in {project_id}"
    )
    request.app[DEPS].stores.project_bindings.put(created)
    return created


async def unbind_cluster(request: web.Request, binding: Obj) -> None:
    meta = binding["metadata"]
    await delete_if_present(
        request.app[DEPS].kube, kinds.ClusterRoleTemplateBinding, meta["name"], meta["namespace"]
    )
    request.app[DEPS].stores.cluster_bindings.forget(f"{meta['namespace']}/{meta['name']}")


async def unbind_project(request: web.Request, binding: Obj) -> None:
    meta = binding["metadata"]
    await delete_if_present(
        request.app[DEPS].kube, kinds.ProjectRoleTemplateBinding, meta["name"], meta["namespace"]
    )
    request.app[DEPS].stores.project_bindings.forget(f"{meta['namespace']}/{meta['name']}")


async def bind_creator(request: web.Request, project: Obj, user_id: str) -> None:
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
    kube = request.app[DEPS].kube
    try:
        created = await kube.create(binding)
    except KubeApiError as exc:
        if exc.status.code != 409:
            log.warning("project %s: cannot bind its creator: %s", pid, exc)
            return
        created = await kube.get(
            kinds.ProjectRoleTemplateBinding, binding_name, namespace=namespace
        )
    request.app[DEPS].stores.project_bindings.put(as_dict(created))


async def _create_once(request: web.Request, binding: Any, taken: str) -> Obj:
    """Create a binding under its derived name: of two identical grants sent at once,
    Kubernetes refuses the second, which a look at the cache before could not."""
    try:
        return as_dict(await request.app[DEPS].kube.create(binding))
    except KubeApiError as exc:
        if exc.status.code == 409:
            raise errors.conflict(taken) from None
        raise
