"""The caches the API server keeps of downstream clusters, through the connection registry:
namespaces and corral's ResourceQuotas, so that membership, usage and quota checks never cost
a round trip to the cluster, and the workloads, pods, Services and Ingresses of all
namespaces, which `/v3` lists and shows (writes are put into them at once). Each is started
the first time a request needs it; the workloads' and pods' changes are published to
`GET /v3/subscribe` from then on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace, Pod, ResourceQuota, Service
from lightkube.resources.networking_v1 import Ingress

from corral.apiserver.state.changes import Changes
from corral.core.api import names
from corral.core.kube import workloads
from corral.core.kube.connections import Connections
from corral.core.kube.informer import Informer, Obj
from corral.core.workloads import pods
from corral.core.workloads.kinds import Kind


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


def _namespace(obj: Obj) -> list[str]:
    return [obj["metadata"]["namespace"]]


async def _by_namespace(
    connections: Connections,
    cluster: str,
    name: str,
    resource: Any,
    keep: Callable[[Obj], Obj] | None = None,
    changes: Changes | None = None,
    versioned: bool = False,
) -> Informer:
    """`versioned`: the informer tells when each namespace's objects last moved (`touched`)."""
    hook = changes.hook(name, cluster) if changes is not None else None

    def made(client: AsyncClient) -> Informer:
        def published(event: str, obj: Obj) -> None:
            # The first listing is what every reader's list already holds: only what follows
            # is news (and a cluster of thousands of pods would fill every subscriber's queue).
            if hook is not None and informer.synced.is_set():
                hook(event, obj)

        informer = Informer(
            client, resource, {"namespace": _namespace}, namespace="*", keep=keep,
            on_change=published, versioned=("namespace",) if versioned else (),
        )  # fmt: skip
        return informer

    return await connections.informer(cluster, name, made)


def workloads_cache(kind: Kind) -> str:
    """The name of the informer of one workload kind (and of its changes, `Change.cache`)."""
    return f"workloads:{kind.type}"


PODS_CACHE = "pods"


async def downstream_workloads(
    connections: Connections, cluster: str, kind: Kind, changes: Changes
) -> Informer:
    """The cluster's objects of one workload kind (indexed by `namespace`, which tells when
    each namespace's last moved: what a project's workloads show is derived again only after
    one of its own namespaces' did)."""
    return await _by_namespace(
        connections,
        cluster,
        workloads_cache(kind),
        workloads.RESOURCES[kind.type],
        changes=changes,
        versioned=True,
    )


async def downstream_pods(connections: Connections, cluster: str, changes: Changes) -> Informer:
    """The cluster's pods (indexed by `namespace`, which tells when each namespace's last
    moved), each cut to what `/v3` shows of it."""
    return await _by_namespace(
        connections, cluster, PODS_CACHE, Pod, pods.trimmed, changes=changes, versioned=True
    )


async def downstream_services(connections: Connections, cluster: str) -> Informer:
    return await _by_namespace(connections, cluster, "services", Service, versioned=True)


async def downstream_ingresses(connections: Connections, cluster: str) -> Informer:
    return await _by_namespace(connections, cluster, "ingresses", Ingress, versioned=True)
