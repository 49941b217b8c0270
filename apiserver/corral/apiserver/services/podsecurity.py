"""The Pod Security level of a project's namespaces as the API server knows it (from its caches
of Clusters and Projects), and who may choose one (`corral.core.projects.podsecurity`)."""

from __future__ import annotations

from typing import Any

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj
from corral.core.projects import podsecurity
from corral.core.projects.podsecurity import CLUSTER_FIELD, PROJECT_FIELD


def cluster_level(deps: Deps, cluster: str) -> str:
    obj = deps.stores.clusters.get(cluster) or {}
    return podsecurity.cluster_level((obj.get("spec") or {}).get(CLUSTER_FIELD))


def project_level(deps: Deps, project: Obj) -> str:
    """The level the project's namespaces enforce."""
    return podsecurity.of_project(project, cluster_level(deps, project["metadata"]["namespace"]))


def labels_for(deps: Deps, project_id: str | None) -> dict[str, str]:
    """The Pod Security labels of a namespace in `project_id` (none outside every project)."""
    if not project_id:
        return {}
    pid = ScopedId.parse(project_id)
    project = deps.stores.projects.get(pid.key)
    if project is None:
        return {}
    return podsecurity.labels(project_level(deps, project))


def chosen_level(
    deps: Deps, who: Caller, body: dict[str, Any], cluster: str, current: str = ""
) -> str:
    """The `podSecurityLevel` a project's body gives, checked: 422 for a value that is not a
    level, 403 for a loosening by someone who is not an administrator. The level the project
    has already (a client sending back what it read) is no change, whoever sends it."""
    level = podsecurity.check_level(body.get(PROJECT_FIELD), PROJECT_FIELD)
    limit = cluster_level(deps, cluster)
    if level != current and not podsecurity.may_set_level(level, limit, who.is_admin):
        why = "" if level == podsecurity.PRIVILEGED else f", looser than the cluster's {limit}"
        raise errors.forbidden(f"only administrators may set {PROJECT_FIELD} {level}{why}")
    return level
