"""Installing a provisioned cluster's pod network (core/provisioning/network.py says what it is).

The pod network is part of what corral provisions, so it goes with corral's own credential.
It is applied once the control plane is up and corral is in, again whenever what it should be
changes (a version whose images differ), and every RESYNC anyway, so a DaemonSet deleted by
hand comes back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from lightkube import AsyncClient, codecs
from lightkube.resources.apps_v1 import DaemonSet
from lightkube.resources.core_v1 import ConfigMap, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from corral.core.kube.client import delete_if_present
from corral.core.provisioning import catalog, manifests, network
from corral.core.provisioning.flavours import FLAVOURS
from corral.operator.state import State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-pod-network"
RESYNC = 300.0
# What the pod network is made of (core/provisioning/network.py), by kind.
NAMESPACED = ("DaemonSet", "ServiceAccount", "ConfigMap")
RESOURCES: dict[str, Any] = {
    "DaemonSet": DaemonSet,
    "ServiceAccount": ServiceAccount,
    "ConfigMap": ConfigMap,
    "ClusterRole": ClusterRole,
    "ClusterRoleBinding": ClusterRoleBinding,
}


def plugin_of(spec: Mapping[str, Any]) -> str:
    """The cluster's plugin: as admitted, or the flavour's default for a Cluster written with
    kubectl that names none."""
    flavour = FLAVOURS[spec["driver"]]
    config = spec.get(flavour.config_field) or {}
    return str((config.get("networking") or {}).get("plugin") or flavour.default_plugin)


class PodNetwork:
    def __init__(
        self, cluster: str, state: State, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cluster = cluster
        self.state = state
        self.clock = clock
        self._applied: tuple[str, float] | None = None

    async def ensure(self, spec: Mapping[str, Any], release: catalog.Release) -> None:
        """The pod network of `spec`'s plugin from `release`'s images, applied when due."""
        wanted = network.objects(
            plugin_of(spec), release, manifests.CLUSTER_CIDR, manifests.SERVICE_CIDR
        )
        digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()
        if self._applied is not None:
            done, at = self._applied
            if done == digest and self.clock() - at < RESYNC:
                return
        connection = await self.state.connections.connection(self.cluster)
        for body in wanted:
            await connection.client.apply(
                codecs.from_dict(body), field_manager=FIELD_MANAGER, force=True
            )
        if self._applied is None or self._applied[0] != digest:
            await prune(self.cluster, connection.client, wanted)
            if wanted:
                log.info("cluster %s: pod network %s applied", self.cluster, plugin_of(spec))
        self._applied = (digest, self.clock())


async def prune(cluster: str, client: AsyncClient, wanted: list[dict[str, Any]]) -> None:
    """Deletes what an earlier pod network left in `cluster` and `wanted` no longer has (a
    cluster provisioned when kube-network-policies was the enforcer). Done when what is wanted
    changes (corral started, a new version), not every resync: five listings per cluster every
    few minutes would cost the idle operator for nothing."""
    found: list[tuple[str, str, str]] = []
    for kind, resource in RESOURCES.items():
        scope: dict[str, Any] = {"labels": network.LABELS}
        if kind in NAMESPACED:
            scope["namespace"] = network.NAMESPACE
        async for obj in client.list(resource, **scope):
            found.append((kind, obj.metadata.namespace or "", obj.metadata.name))
    for kind, namespace, name in network.stale(wanted, found):
        await delete_if_present(client, RESOURCES[kind], name, namespace or None)
        log.info("cluster %s: removed %s %s of an earlier pod network", cluster, kind, name)
