"""What a user may reach through role bindings, worked out from the cache of bindings.

See `authz` for the rules; this module only computes them, and keeps them per user until a
binding changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from corral.apiserver.state.stores import Stores
from corral.core.api.ids import ScopedId
from corral.core.api.names import backing_namespace
from corral.core.kube.informer import Informer, Obj
from corral.core.projects import roles


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
        if is_admin:
            return cls(user_id, True, {}, {})  # owners of everything: no binding matters
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
            pid = ScopedId.parse_or_none(project)
            if pid is None:
                continue
            if binding["metadata"].get("namespace") == backing_namespace(pid.namespace, pid.name):
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
        return self.cluster_role(cluster) is not None or cluster in self._project_clusters

    @cached_property
    def _project_clusters(self) -> frozenset[str]:
        """The clusters of the projects with a role: asked once per cluster listed."""
        return frozenset(ScopedId.parse(p).namespace for p in self.project_roles)

    def project_role(self, project_id: str) -> str | None:
        """Cluster owners own every project of their cluster."""
        project = ScopedId.parse_or_none(project_id)
        if self.cluster_role(project.namespace if project else "") == roles.CLUSTER_OWNER:
            return roles.PROJECT_OWNER
        return self.project_roles.get(project_id)


class AccessMemo:
    """Each user's Access, worked out again only after some role binding or some user's
    groups changed: a user with many bindings (an admin who created a thousand projects)
    costs nothing per request.

    A user's bindings are their own and those naming a group they are in (the groups their
    provider last said, `Stores.groups`): the union counts, the strongest role wins."""

    def __init__(self) -> None:
        self._versions: tuple[int, int, int] | None = None
        self._by_user: dict[tuple[str, bool], Access] = {}

    def get(self, user_id: str, is_admin: bool, stores: Stores) -> Access:
        versions = (
            stores.cluster_bindings.version,
            stores.project_bindings.version,
            stores.user_attributes.version,
        )
        if versions != self._versions:
            self._by_user.clear()
            self._versions = versions
        found = self._by_user.get((user_id, is_admin))
        if found is None:
            groups = stores.groups(user_id)
            found = self._by_user[(user_id, is_admin)] = Access.of(
                user_id,
                is_admin,
                _bound(stores.cluster_bindings, user_id, groups),
                _bound(stores.project_bindings, user_id, groups),
            )
        return found


def _bound(bindings: Informer, user_id: str, groups: Iterable[str]) -> list[Obj]:
    found = list(bindings.by_index("user", user_id))
    for group in groups:
        found += bindings.by_index("group", group)
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
