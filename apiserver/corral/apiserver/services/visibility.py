"""Which clusters and projects the caller can see, and which they administer.

What the caller cannot see is answered 404 whether it exists or not (`auth.authz`); 403 is for
what they see but may not change.
"""

from __future__ import annotations

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj
from corral.core.projects import roles


def visible_cluster(deps: Deps, who: Caller, cluster_id: str) -> Obj:
    """A cluster the caller is bound to (or any, for administrators); else 404."""
    obj = deps.stores.clusters.get(cluster_id)
    if obj is None or not who.access.sees_cluster(cluster_id):
        raise errors.not_found(f"cluster {cluster_id} not found")
    return obj


def owned_cluster(deps: Deps, who: Caller, cluster_id: str, what: str) -> Obj:
    """A cluster the caller may administer; 403 for one they only see."""
    obj = visible_cluster(deps, who, cluster_id)
    if who.access.cluster_role(cluster_id) != roles.CLUSTER_OWNER:
        raise errors.forbidden(f"only owners of cluster {cluster_id} may {what}")
    return obj


def seen_project(deps: Deps, who: Caller, pid: str) -> Obj | None:
    """A project the caller has a role in; None whether it exists or not."""
    project = ScopedId.parse_or_none(pid)
    obj = deps.stores.projects.get(project.key) if project else None
    return obj if obj is not None and who.access.project_role(pid) is not None else None


def visible_project(deps: Deps, who: Caller, pid: str) -> Obj:
    """A project the caller has a role in; else 404, whether it exists or not."""
    obj = seen_project(deps, who, pid)
    if obj is None:
        raise errors.not_found(f"project {pid} not found")
    return obj


def owned_project(deps: Deps, who: Caller, pid: str, what: str) -> Obj:
    """A project the caller may administer; 403 for one they only see."""
    obj = visible_project(deps, who, pid)
    if not roles.may_manage_project(who.access.project_role(pid)):
        raise errors.forbidden(f"only owners of project {pid} may {what}")
    return obj
