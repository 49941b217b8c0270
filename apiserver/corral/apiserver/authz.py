"""What a caller may do. Admins (global role `admin`) may do everything. Other users act on
their own objects, and on clusters and projects as their role bindings say:

- a cluster role binding makes a user `cluster-owner` (administer the cluster, its nodes and
  every project in it) or `cluster-member` (see the cluster and its nodes, create projects);
- a project role binding makes a user `project-owner` (administer the project and its
  bindings), `project-member` (manage its namespaces) or `read-only`;
- anyone bound to a project in a cluster can see that cluster, not its other projects.

An object the caller may not even see is answered 404, never 403, so that its existence does
not leak; 403 is for what they can see but not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiohttp import web

from corral.apiserver import errors
from corral.apiserver.authn import Principal, principal
from corral.apiserver.cache import Obj
from corral.apiserver.keys import STORES
from corral.core import resources
from corral.core.projects import roles


def require_admin(who: Principal, what: str) -> None:
    """For objects the caller can see but not change (or collections it cannot write)."""
    if not who.is_admin:
        raise errors.forbidden(f"only administrators may {what}")


@dataclass(frozen=True)
class Access:
    user_id: str
    is_admin: bool
    cluster_roles: Mapping[str, str]  # cluster id -> the strongest cluster role
    project_roles: Mapping[str, str]  # project id (`<cluster>:<project>`) -> strongest role

    @classmethod
    def of(
        cls,
        user_id: str,
        is_admin: bool,
        cluster_bindings: Iterable[Obj],
        project_bindings: Iterable[Obj],
    ) -> Access:
        """From the user's bindings. Only a binding stored where the API puts it counts (a
        cluster binding in its cluster's namespace, a project binding in its project's backing
        namespace), as for the operator, which turns only those into RBAC."""
        by_cluster: dict[str, list[str]] = {}
        for binding in cluster_bindings:
            spec = binding.get("spec") or {}
            cluster = spec.get("clusterName", "")
            if binding["metadata"].get("namespace") == cluster:
                by_cluster.setdefault(cluster, []).append(spec.get("roleTemplateName", ""))
        by_project: dict[str, list[str]] = {}
        for binding in project_bindings:
            spec = binding.get("spec") or {}
            project = spec.get("projectName", "")
            cluster, _, name = project.partition(":")
            if binding["metadata"].get("namespace") == resources.backing_namespace(cluster, name):
                by_project.setdefault(project, []).append(spec.get("roleTemplateName", ""))
        return cls(
            user_id,
            is_admin,
            _strongest(by_cluster, roles.CLUSTER_ROLES),
            _strongest(by_project, roles.PROJECT_ROLES),
        )

    def cluster_role(self, cluster: str) -> str | None:
        return roles.CLUSTER_OWNER if self.is_admin else self.cluster_roles.get(cluster)

    def sees_cluster(self, cluster: str) -> bool:
        return self.cluster_role(cluster) is not None or any(
            p.partition(":")[0] == cluster for p in self.project_roles
        )

    def project_role(self, project_id: str) -> str | None:
        """Cluster owners own every project of their cluster."""
        if self.cluster_role(project_id.partition(":")[0]) == roles.CLUSTER_OWNER:
            return roles.PROJECT_OWNER
        return self.project_roles.get(project_id)


def access(request: web.Request) -> Access:
    """The caller's access, worked out once per request."""
    if "access" not in request:
        who, stores = principal(request), request.app[STORES]
        request["access"] = Access.of(
            who.user_id,
            who.is_admin,
            stores.cluster_bindings.by_index("user", who.user_id),
            stores.project_bindings.by_index("user", who.user_id),
        )
    found: Access = request["access"]
    return found


def _strongest(
    granted: Mapping[str, list[str]], catalog: dict[str, roles.RoleTemplate]
) -> dict[str, str]:
    result = {}
    for target, names in granted.items():
        role = roles.strongest(names, catalog)
        if role is not None:
            result[target] = role
    return result
