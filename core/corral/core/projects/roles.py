"""The built-in role templates: what each lets a user do through `/v3`, and the RBAC it
becomes in the downstream cluster.

Project roles are bound in every namespace of the project to Kubernetes' own aggregated
ClusterRoles (`admin`, `edit`, `view`), so the cluster's RBAC enforces them for kubectl
through corral exactly as `/v3` does. Cluster roles become ClusterRoleBindings.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.core.api import ids

PROJECT_OWNER = "project-owner"
PROJECT_MEMBER = "project-member"
READ_ONLY = "read-only"
CLUSTER_OWNER = "cluster-owner"
CLUSTER_MEMBER = "cluster-member"

# The downstream ClusterRole corral creates for cluster members: see the cluster's nodes and
# namespaces and what is stored cluster-wide, change nothing.
CLUSTER_MEMBER_CLUSTERROLE = "corral-cluster-member"


@dataclass(frozen=True)
class RoleTemplate:
    name: str
    display_name: str
    context: str  # "project" or "cluster"
    downstream_role: str  # the ClusterRole bound downstream
    rank: int  # higher grants more; a user's strongest binding decides


PROJECT_ROLES = {
    r.name: r
    for r in (
        RoleTemplate(PROJECT_OWNER, "Project Owner", "project", "admin", 3),
        RoleTemplate(PROJECT_MEMBER, "Project Member", "project", "edit", 2),
        RoleTemplate(READ_ONLY, "Read-only", "project", "view", 1),
    )
}
CLUSTER_ROLES = {
    r.name: r
    for r in (
        RoleTemplate(CLUSTER_OWNER, "Cluster Owner", "cluster", "cluster-admin", 3),
        RoleTemplate(CLUSTER_MEMBER, "Cluster Member", "cluster", CLUSTER_MEMBER_CLUSTERROLE, 1),
    )
}

CLUSTER_MEMBER_RULES = [
    {
        "apiGroups": [""],
        "resources": ["nodes", "namespaces", "persistentvolumes"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["storage.k8s.io"],
        "resources": ["storageclasses"],
        "verbs": ["get", "list", "watch"],
    },
]


def project_binding_name(subject: str, role: str) -> str:
    """The one name a project role binding of a user (or group principal, whose `://` no
    user id holds) can have in its project's namespace: the API and the operator (binding a
    project's creator) cannot both make one."""
    return ids.derived("prtb", subject, role, length=10)


def cluster_binding_name(subject: str, role: str) -> str:
    """The one name a cluster role binding of a user (or group) can have in its cluster's
    namespace."""
    return ids.derived("crtb", subject, role, length=10)


def strongest(roles: list[str], catalog: dict[str, RoleTemplate]) -> str | None:
    """The role that grants the most among `roles` (unknown names are ignored)."""
    known = [catalog[r] for r in roles if r in catalog]
    return max(known, key=lambda r: r.rank).name if known else None


def may_manage_project(role: str | None) -> bool:
    """Update or delete the project and manage its role bindings."""
    return role == PROJECT_OWNER


def may_write_namespaces(role: str | None) -> bool:
    """Create namespaces in the project and move them in or out."""
    return role in (PROJECT_OWNER, PROJECT_MEMBER)


def may_write_workloads(role: str | None) -> bool:
    """Create, change and delete the project's workloads, and exec into its pods (as the
    `edit` ClusterRole the role is bound to downstream allows)."""
    return role in (PROJECT_OWNER, PROJECT_MEMBER)


def may_write_secrets(role: str | None) -> bool:
    """Create, change and delete the project's secrets and its namespaces' secrets; read-only
    sees their names and keys, never their data."""
    return role in (PROJECT_OWNER, PROJECT_MEMBER)
