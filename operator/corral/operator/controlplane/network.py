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

from lightkube import codecs

from corral.core.provisioning import catalog, manifests, network
from corral.core.provisioning.flavours import FLAVOURS
from corral.operator.state import State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-pod-network"
RESYNC = 300.0


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
        if wanted and (self._applied is None or self._applied[0] != digest):
            log.info("cluster %s: pod network %s applied", self.cluster, plugin_of(spec))
        self._applied = (digest, self.clock())
