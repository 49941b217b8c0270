"""Which clusters and projects the caller can see, and which they administer.

What the caller cannot see is answered 404 whether it exists or not (`auth.authz`); 403 is for
what they see but may not change.
"""

from __future__ import annotations

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Informer, Obj
from corral.core.projects import roles


def seen_cluster(deps: Deps, who: Caller, cluster_id: str) -> Obj | None:
    """A cluster the caller is bound to (or any, for administrators); None for any other."""
    obj = deps.stores.clusters.get(cluster_id)
    return obj if obj is not None and who.access.sees_cluster(cluster_id) else None


async def settle_cluster(deps: Deps, who: Caller, cluster_id: str) -> None:
    """Before a request body's reference to a cluster the caller may see is checked: one
    created through the management cluster a moment ago (`kubectl apply`) is read live, so
    the request does not fail for a watch event still on its way."""
    if who.access.sees_cluster(cluster_id):
        await deps.stores.clusters.read_through(cluster_id)


async def settle_project(deps: Deps, who: Caller, pid: str) -> None:
    """`settle_cluster`, for a project the caller has a role in."""
    project = ScopedId.parse_or_none(pid)
    if project is not None and who.access.project_role(pid) is not None:
        await deps.stores.projects.read_through(project.key)


def visible_cluster(deps: Deps, who: Caller, cluster_id: str) -> Obj:
    """A cluster the caller is bound to (or any, for administrators); else 404."""
    obj = seen_cluster(deps, who, cluster_id)
    if obj is None:
        raise errors.not_found(f"cluster {cluster_id} not found")
    return obj


def of_member_cluster(who: Caller, cache: Informer, scoped_id: str) -> Obj | None:
    """The object of id `<cluster>:<name>` in `cache` when the caller is a member of its
    cluster (or owns it); None for any other, whether it exists or not."""
    sid = ScopedId.parse_or_none(scoped_id)
    obj = cache.get(sid.key) if sid else None
    if sid is None or obj is None or who.access.cluster_role(sid.namespace) is None:
        return None
    return obj


def require_cluster_owner(who: Caller, cluster_id: str, what: str) -> None:
    """403 unless the caller administers the cluster (which they see, or it is 404 first):
    from their roles alone, so that every resource of a page is judged at no cost."""
    if who.access.cluster_role(cluster_id) != roles.CLUSTER_OWNER:
        raise errors.forbidden(f"only owners of cluster {cluster_id} may {what}")


def owned_cluster(deps: Deps, who: Caller, cluster_id: str, what: str) -> Obj:
    """A cluster the caller may administer; 403 for one they only see."""
    obj = visible_cluster(deps, who, cluster_id)
    require_cluster_owner(who, cluster_id, what)
    return obj


def seen_project(deps: Deps, who: Caller, pid: str) -> Obj | None:
    """A project the caller has a role in; None whether it exists or not."""
    project = ScopedId.parse_or_none(pid)
    obj = deps.stores.projects.get(project.key) if project else None
    return obj if obj is not None and who.access.project_role(pid) is not None else None


def of_member_clusters(who: Caller, cache: Informer, cluster_id: str | None) -> list[Obj]:
    """The objects of `cache` (indexed by cluster) in the clusters the caller is a member of;
    only those of `cluster_id` when given."""
    objs = cache.by_index("cluster", cluster_id) if cluster_id else cache.all()
    return [o for o in objs if who.access.cluster_role(o["metadata"]["namespace"]) is not None]


def visible_project(deps: Deps, who: Caller, pid: str) -> Obj:
    """A project the caller has a role in; else 404, whether it exists or not."""
    obj = seen_project(deps, who, pid)
    if obj is None:
        raise errors.not_found(f"project {pid} not found")
    return obj


def require_project_owner(who: Caller, pid: str, what: str) -> None:
    """403 unless the caller administers the project (which they see, or it is 404 first)."""
    if not roles.may_manage_project(who.access.project_role(pid)):
        raise errors.forbidden(f"only owners of project {pid} may {what}")
