"""The aiohttp application factory."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web
from lightkube import AsyncClient
from lightkube.types import PatchType

from corral.apiserver import heap
from corral.apiserver.auth import ratelimit
from corral.apiserver.auth.access import AccessMemo
from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.ledger import KubeLedger
from corral.apiserver.auth.ratelimit import RateLimiter
from corral.apiserver.auth.throttle import LoginThrottle
from corral.apiserver.auth.verified import VerifiedTokens
from corral.apiserver.config import DEFAULT_AGENT_IMAGE
from corral.apiserver.deps import DEPS, Deps
from corral.apiserver.http import urls
from corral.apiserver.http.renderings import Renderings
from corral.apiserver.http.schemas import Registry
from corral.apiserver.middleware import api_middleware, response_headers
from corral.apiserver.readiness import Readiness
from corral.apiserver.resources.subscriptions import SUBSCRIBABLE, Offered
from corral.apiserver.routes import (
    agents,
    assets,
    authconfigs,
    authproviders,
    cloudcredentials,
    clusterregistrationtokens,
    clusterroletemplatebindings,
    clusters,
    connect,
    console,
    globalrolebindings,
    health,
    login,
    namespacedsecrets,
    namespaces,
    nodedrivers,
    nodepools,
    nodes,
    nodetemplates,
    pods,
    projectroletemplatebindings,
    projects,
    provisioningclusters,
    proxy,
    root,
    schemas,
    secrets,
    settings,
    subscribe,
    tokens,
    users,
    workloads,
)
from corral.apiserver.state.derived import Derived
from corral.apiserver.state.stores import Stores
from corral.core import times
from corral.core.api import names
from corral.core.github.client import Clients
from corral.core.kube import kinds
from corral.core.kube.connections import Connections
from corral.core.kube.oidc_secrets import StateKey
from corral.core.kube.tunnel_leases import Relays
from corral.core.kube.tunnel_proxy import PeerTLS, TunnelProxy
from corral.core.kube.tunnels import Tunnels
from corral.core.oidc.provider import Providers

log = logging.getLogger(__name__)

# How long a stopping replica tries to give back its rate-limit reservations.
RELEASE_SECONDS = 5.0

ROUTE_MODULES = [
    health, assets, root, schemas, login, tokens, users, globalrolebindings, settings, clusters,
    nodes, proxy, projects, namespaces, projectroletemplatebindings, clusterroletemplatebindings,
    workloads, pods, secrets, namespacedsecrets, nodedrivers, nodetemplates, cloudcredentials,
    nodepools, authproviders, authconfigs, provisioningclusters, clusterregistrationtokens,
    connect, console, subscribe, agents,
]  # fmt: skip
SCHEMA_LIST = [
    tokens.SCHEMA, users.SCHEMA, users.SET_PASSWORD, users.CHANGE_PASSWORD,
    globalrolebindings.SCHEMA, settings.SCHEMA, clusters.SCHEMA, clusters.KUBECONFIG_INPUT,
    clusters.KUBECONFIG_OUTPUT, nodes.SCHEMA, nodes.DRAIN, nodes.CUSTOM_CONFIG,
    projects.SCHEMA, projects.EVENT, namespaces.SCHEMA, projectroletemplatebindings.SCHEMA,
    clusterroletemplatebindings.SCHEMA, workloads.SCHEMA, workloads.ROLLBACK, workloads.REVISION,
    pods.SCHEMA, pods.EXEC_INPUT, pods.EXEC_OUTPUT, secrets.SCHEMA, namespacedsecrets.SCHEMA,
    nodedrivers.SCHEMA, nodetemplates.SCHEMA, cloudcredentials.SCHEMA, nodepools.SCHEMA,
    authconfigs.SCHEMA, authconfigs.TEST_OUTPUT, authconfigs.APPLY_INPUT,
    authconfigs.GITHUB_TEST_OUTPUT, authconfigs.GITHUB_APPLY_INPUT,
    clusters.BACKUP_SCHEMA, clusters.RESTORE_INPUT, clusters.ROTATE_INPUT, clusters.ROTATE_OUTPUT,
    clusterregistrationtokens.SCHEMA,
]  # fmt: skip


def create_app(
    kube: AsyncClient,
    features: dict[str, bool],
    external_url: str,
    corral_ca: bytes | None = None,
    driver_files: str | None = None,
    node_assets: Path | None = None,
    serving_cert: bytes | None = None,
    throttle: Path | None = None,
    tunnel_listen: tuple[str, int] = ("127.0.0.1", 0),
    tunnel_advertise: str = "",
    agent_image: str = DEFAULT_AGENT_IMAGE,
    *,
    tls: ssl.SSLContext,
    peer: PeerTLS | None = None,
) -> web.Application:
    """`throttle`: the file the login throttle's counts are shared through with the other
    workers of this server; None keeps them in memory. `tls`: the TLS of corral's serving
    certificate, which the tunnel relay other processes reach serves with as well; `peer`:
    how another replica's relay is checked (by default as corral's external URL is, against
    `corral_ca`)."""
    app = web.Application(middlewares=[api_middleware])
    app.on_response_prepare.append(response_headers)
    schemas = Registry()
    schemas.add(*SCHEMA_LIST)
    stores = Stores.create(kube)
    relays = Relays(kube)
    tunnels = Tunnels(kube, relays, tls, tunnel_listen, tunnel_advertise)
    peer = peer or PeerTLS.of(external_url, corral_ca)
    proxy = TunnelProxy(relays, peer, tunnels.tunnel)
    app[DEPS] = Deps(
        kube=kube,
        stores=stores,
        connections=Connections(kube, proxy),
        tunnels=tunnels,
        external_url=external_url,
        corral_ca=corral_ca,
        serving_cert=serving_cert,
        driver_files=driver_files,
        node_assets=node_assets,
        agent_image=agent_image,
        features=features,
        providers=Providers(),
        github=Clients(),
        login_state_key=StateKey(),
        schemas=schemas,
        access=AccessMemo(),
        activity=ActivityTracker(_activity_writer(kube)),
        verified=VerifiedTokens(),
        workload_rows=Derived(),
        workload_states=Derived(),
        renderings=Renderings(),
        limiter=RateLimiter(KubeLedger(kube, stores.user_uid)),
        throttle=LoginThrottle(throttle),
        readiness=Readiness(),
    )
    offered: tuple[Offered, ...] = (
        clusters.SUBSCRIBABLE, nodes.SUBSCRIBABLE, nodepools.SUBSCRIBABLE, projects.SUBSCRIBABLE,
        projectroletemplatebindings.SUBSCRIBABLE, clusterroletemplatebindings.SUBSCRIBABLE,
        workloads.SUBSCRIBABLE, pods.SUBSCRIBABLE)  # fmt: skip
    app[SUBSCRIBABLE] = {s.resource_type: s for s in offered}
    urls.add_routes(app.router, (module.routes for module in ROUTE_MODULES))
    app.cleanup_ctx.append(_background)
    app.on_shutdown.append(_end_tunnels)
    return app


async def _end_tunnels(app: web.Application) -> None:
    """Ends the tunnels this replica holds (close code 1001) before the server waits for its
    handlers to finish: a tunnel's handler ends only when its tunnel does, so a replica
    holding one would otherwise take the whole shutdown timeout (60 s) to stop, and its
    agents would dial another replica only then."""
    await app[DEPS].tunnels.close()


def _activity_writer(kube: AsyncClient):  # type: ignore[no-untyped-def]
    async def write(token: str, seen: datetime.datetime) -> None:
        annotations = {names.ANNOTATION_LAST_ACTIVITY: times.format_time(seen)}
        await kube.patch(kinds.Token, token, {"metadata": {"annotations": annotations}},
                         patch_type=PatchType.MERGE)  # fmt: skip

    return write


async def _background(app: web.Application) -> AsyncIterator[None]:
    """Feed the caches and open the readiness gate once all have listed; flush activity."""
    held = app[DEPS]
    stores, connections, readiness = held.stores, held.connections, held.readiness
    informers = [*stores.all(), connections.credentials]
    for informer in informers:
        readiness.gate(informer.name)

    async def open_gates() -> None:
        for informer in informers:
            await informer.synced.wait()
            readiness.open(informer.name)
        heap.settle()  # the caches' first listings, out of the collector's way at once

    async def prune() -> None:
        while True:
            await asyncio.sleep(60)
            held.limiter.prune(time.time())
            held.throttle.prune(time.monotonic())
            held.activity.prune(datetime.datetime.now(datetime.UTC))

    async def settle_rate_limits() -> None:
        # Requests reserved under a limit that has just changed go back to the shared records
        # as soon as this replica sees the change, whether its users call again or not.
        version = -1
        while True:
            version = await stores.settings.changed(version)
            limit = int(stores.number(ratelimit.SETTING))
            await held.limiter.settle(limit, time.time())

    async with stores.running():
        tasks = [
            asyncio.create_task(connections.run()),
            asyncio.create_task(open_gates()),
            asyncio.create_task(held.activity.run(
                lambda: stores.number("auth-user-session-idle-ttl-minutes"))),
            asyncio.create_task(prune()),
            asyncio.create_task(settle_rate_limits()),
            asyncio.create_task(heap.keep_settled()),
        ]  # fmt: skip
        yield
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # Served no more: what this replica holds reserved is the other replicas' to use. A
        # management cluster that does not answer must not hold up the stop.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RELEASE_SECONDS):
                await held.limiter.release(time.time())
    await connections.close()
    await held.kube.close()
    held.throttle.close()
