"""The caches the API server keeps of downstream clusters, through the connection registry:
namespaces and corral's ResourceQuotas, so that membership, usage and quota checks never cost
a round trip to the cluster (writes are put into them at once)."""

from __future__ import annotations

from lightkube.resources.core_v1 import Namespace, ResourceQuota

from corral.core.api import names
from corral.core.kube.connections import Connections
from corral.core.kube.informer import Informer, Obj


def _project(obj: Obj) -> list[str]:
    value = (obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_PROJECT)
    return [value] if value else []


def _quota_project(obj: Obj) -> list[str]:
    value = (obj["metadata"].get("labels") or {}).get(names.LABEL_PROJECT)
    return [value] if value else []


async def downstream_namespaces(connections: Connections, cluster: str) -> Informer:
    """The cluster's namespaces (indexed by `project` id), listed at least once."""
    return await connections.informer(
        cluster, "namespaces", lambda client: Informer(client, Namespace, {"project": _project})
    )


async def downstream_quotas(connections: Connections, cluster: str) -> Informer:
    """The ResourceQuotas corral keeps in the cluster (indexed by `project` name)."""
    managed = {names.LABEL_MANAGED_BY: names.MANAGED_BY}
    return await connections.informer(
        cluster,
        "quotas",
        lambda client: Informer(
            client, ResourceQuota, {"project": _quota_project}, namespace="*", labels=managed
        ),
    )
