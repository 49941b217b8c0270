"""How kopf runs corral: storage names, timeouts, and the peering object."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import create_global_resource
from lightkube.models.meta_v1 import ObjectMeta

from corral.core.api import names
from corral.core.kube import client as kube
from corral.operator.config import OperatorConfig
from corral.operator.controlplane.starts import Starts
from corral.operator.drivers.cache import Cache
from corral.operator.drivers.registry import Drivers
from corral.operator.management import bootstrap
from corral.operator.management.cluster_runtime import ClusterRuntime
from corral.operator.management.nodedrivers import DriverKeeper
from corral.operator.management.shard_manager import ShardManager
from corral.operator.management.sshmachines import SSHMachines
from corral.operator.management.tokens import ExpiryQueue
from corral.operator.state import State

# Everything kopf stores on our objects lives under corral's own domain. Annotations, not
# status: the CRD schemas are strict and would prune unknown status fields.
STORAGE_PREFIX = "operator.svc.io"

ClusterKopfPeering = create_global_resource(
    "kopf.dev", "v1", "ClusterKopfPeering", "clusterkopfpeerings"
)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = names.FINALIZER_OPERATOR
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=STORAGE_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=STORAGE_PREFIX, key="last-handled-configuration"
    )
    # Explicit timeouts: without them a silently dropped watch leaves handlers blind for hours.
    settings.watching.server_timeout = 600
    settings.watching.client_timeout = 630
    settings.watching.connect_timeout = 10
    settings.networking.connect_timeout = 10
    settings.networking.request_timeout = 60
    # A replica that died holds kopf's leadership until its peering record runs out: kopf's
    # 60 s default paused every management handler for a minute after a crash. kopf renews
    # 5-10 s before the end, so 20 s keeps a live leader's record current under load.
    settings.peering.lifetime = 20
    # Kubernetes events are for what a user must see, not for every handler run.
    settings.posting.level = logging.WARNING
    settings.execution.max_workers = 8
    # One client for every handler, and what the operator keeps in memory: handlers find
    # them in the memo.
    memo.kube = kube.async_client()
    config: OperatorConfig = memo.get("config") or OperatorConfig.from_env()
    memo.state = State(memo.kube, corral=config.corral)
    memo.state_task = asyncio.create_task(memo.state.run())
    memo.token_expiries = ExpiryQueue()
    cache = Cache(config.driver_cache)
    memo.drivers = DriverKeeper(memo.kube, cache, memo.state.clock, files=config.driver_files)
    memo.machine_drivers = Drivers(memo.kube, cache)
    memo.hosted_grant = config.hosted_grant
    memo.ssh_machines = SSHMachines(memo.state)
    await ensure_peering_object(memo.kube, settings.peering.name)
    await bootstrap.run(memo.kube)
    memo.starts = Starts(config.hosted_starts)
    # On every replica, whether peering made it the leader or not: the clusters are shared.
    memo.shard_manager = ShardManager(
        memo.state,
        config.identity,
        config.shards,
        lambda cluster, driver: ClusterRuntime.assemble(
            cluster, driver, memo.state, memo.machine_drivers, memo.hosted_grant, memo.starts
        ),
    )
    memo.shards_task = asyncio.create_task(memo.shard_manager.run())


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    # The clusters first: their runtimes stop and their shards are let go while the state
    # still runs.
    for task in (memo.shards_task, memo.state_task):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await memo.kube.close()


async def ensure_peering_object(client: AsyncClient, name: str) -> None:
    """kopf elects the active replica through this object; without it every replica is active."""
    try:
        await client.create(ClusterKopfPeering(metadata=ObjectMeta(name=name)))
    except ApiError as exc:
        if exc.status.code != 409:
            raise


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """Log in from the pod's service account or $KUBECONFIG with kopf's own readers.

    Without this handler kopf piggybacks on the official `kubernetes` client whenever it is
    installed, and that import alone dominates the operator's memory.
    """
    in_cluster = kopf.login_with_service_account(**kwargs)
    if in_cluster is not None:
        return dataclasses.replace(in_cluster, server=in_cluster_server(in_cluster.server))
    return kopf.login_with_kubeconfig(**kwargs)


def in_cluster_server(fallback: str) -> str:
    """The API server's address from the variables the kubelet sets, as client-go does.

    kopf's reader names https://kubernetes.default.svc, which needs cluster DNS: the operator
    would stand still wherever DNS is missing or down while the API server is reachable.
    """
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return fallback
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
