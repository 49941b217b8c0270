"""Families of objects that live in their cluster's namespace, with the id `<cluster>:<name>`:
the link to their cluster and, for those the cluster's members see (node pools, etcd backups),
how such a family lists, finds and names its objects, for its `Family` to take whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.apiserver.resources.family import Ask
from corral.apiserver.services.visibility import of_member_cluster, of_member_clusters
from corral.apiserver.state.stores import Stores
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Informer, Obj


def scoped_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def cluster_link(ask: Ask, obj: Obj) -> dict[str, str]:
    """The link to the cluster whose namespace holds the object."""
    return {"cluster": f"{ask.base}/v3/clusters/{obj['metadata']['namespace']}"}


def seen_by_members(cache: Callable[[Stores], Informer]) -> dict[str, Any]:
    """`listed` (of the cluster `clusterId` when the query names one), `find` and `ident` of a
    family whose objects `cache` holds, indexed by cluster."""

    def listed(ask: Ask) -> list[Obj]:
        return of_member_clusters(ask.who, cache(ask.deps.stores), ask.query.get("clusterId"))

    def find(ask: Ask, resource_id: str) -> Obj | None:
        return of_member_cluster(ask.who, cache(ask.deps.stores), resource_id)

    return {"listed": listed, "find": find, "ident": scoped_id}
