"""The agent of one downstream cluster: its connection (from the registry), its informers on
the cluster's nodes and namespaces, and what it keeps in step with them: the cluster's health,
the node mirror and its drains, the projects' objects in the cluster.

It makes a pass when woken, and each pass does what its reasons call for: the timer (every
`PROBE_INTERVAL`) or a new credential looks at everything (probe, pods, nodes, projects); a
node's change runs the node mirror; a namespace's, project's, binding's or the cluster spec's
runs the project sync; the autoscaler runs on each full look, on the pods it listed. A pass
that leaves work pending asks for the next one soon. The cluster's status is written after
every pass, and only when it changes.

Every sync of a pass runs whatever the others did: one that fails is reported on the cluster's
`Updated` condition (and a node's on that node) until it runs again and works; it is never
fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from lightkube import AsyncClient
from lightkube.resources.certificates_v1 import CertificateSigningRequest
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.core_v1 import Node as DownstreamNode

from corral.core.api import drivers, names
from corral.core.clusters import observe
from corral.core.errors import Unavailable
from corral.core.kube import agent, claims
from corral.core.kube.client import ensure_namespace
from corral.core.kube.connections import Connection
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.operator.downstream import (
    autoscaler,
    drain,
    health,
    kubelets,
    nodes,
    pools,
    projects,
)
from corral.operator.drivers.registry import Drivers
from corral.operator.state import State
from corral.operator.wakeups import Wake, Wakeups

log = logging.getLogger(__name__)

PROBE_INTERVAL = 5.0
# After a pass that left work pending: the first retry, doubled while it stays pending.
RETRY_MIN = 0.25
T = TypeVar("T")

LOOK = {Wake.TIMER, Wake.CREDENTIAL}
NODE_SYNC = LOOK | {Wake.NODE}
PROJECT_SYNC = LOOK | {Wake.NAMESPACE, Wake.PROJECT, Wake.SPEC, Wake.RETRY}
POOL_SYNC = LOOK | {Wake.NODE, Wake.POOL}
CERTIFICATE_SYNC = LOOK | {Wake.NODE, Wake.CERTIFICATE}
# While a pool's machine is on its way (created, draining): how soon the pool is looked at.
POOL_RETRY = 1.0


@dataclass(frozen=True)
class Watched:
    """A kind the agent keeps an informer on in its cluster, and the wake-up its changes give."""

    resource: Any
    name: str
    reason: Wake


NODES = Watched(DownstreamNode, "nodes", Wake.NODE)
NAMESPACES = Watched(Namespace, "namespaces", Wake.NAMESPACE)
# Only in clusters corral provisioned: an imported cluster's kubelets are someone else's.
CERTIFICATES = Watched(CertificateSigningRequest, "certificatesigningrequests", Wake.CERTIFICATE)


class Failures:
    """What failed (what -> why): each until it runs again and works, and at the latest until
    the next full look, which reports only what failed in it. Logged when a failure starts or
    changes and when it ends, not on every pass it goes on failing."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.current: dict[str, str] = {}
        self._unconfirmed: set[str] = set()

    def begin_look(self) -> None:
        self._unconfirmed = set(self.current)

    def end_look(self) -> None:
        for what in list(self._unconfirmed):
            self.record(what, None)

    def record(self, what: str, why: str | None) -> None:
        """The outcome of `what`: why it failed, or None when it worked."""
        self._unconfirmed.discard(what)
        before = self.current.get(what)
        if why is None:
            if before is not None:
                del self.current[what]
                log.info("cluster %s: %s works again", self.cluster, what)
            return
        if before != why:
            log.warning("cluster %s: %s failed: %s", self.cluster, what, why)
        self.current[what] = why

    def replace(self, prefix: str, found: dict[str, str]) -> None:
        """The outcome of every `<prefix><name>` at once: those in `found` failed."""
        for what in [w for w in self.current if w.startswith(prefix)]:
            if what[len(prefix) :] not in found:
                self.record(what, None)
        for name, why in found.items():
            self.record(prefix + name, why)


class Agent:
    def __init__(self, cluster: str, state: State, drivers: Drivers) -> None:
        self.cluster = cluster
        self.state = state
        self.wakeups = Wakeups()
        self.failures = Failures(cluster)
        self.health = health.Health(
            cluster, state.clusters, StatusWriter(state.kube, health.FIELD_MANAGER, state.clock)
        )
        self.drains = drain.Drains(
            cluster, state.nodes, StatusWriter(state.kube, drain.FIELD_MANAGER, state.clock)
        )
        self.nodes = nodes.NodeMirror(
            cluster,
            state.kube,
            state.nodes,
            StatusWriter(state.kube, nodes.FIELD_MANAGER, state.clock),
            self.drains,
        )
        self.pools = pools.PoolSync(
            cluster, state, StatusWriter(state.kube, pools.FIELD_MANAGER, state.clock), drivers
        )
        self.autoscaler = autoscaler.Autoscaler(cluster, state)
        self.projects = projects.ProjectSync(
            cluster, state, StatusWriter(state.kube, projects.FIELD_MANAGER, state.clock)
        )
        self.namespace_ready = False
        # What the last passes saw, for the cluster's status.
        self.connection: Connection | None = None
        self.probe: observe.Probe | None = None
        self.node_list: list[Obj] = []
        self.totals: dict[str, observe.PodTotals] = {}
        # The Cluster that has this cluster's claim, when it is not this one.
        self.duplicate_of: str | None = None
        self.retry = RETRY_MIN

    def wake(self, reason: Wake) -> None:
        self.wakeups.add(reason)

    async def run(self) -> None:
        """Pass after pass, until cancelled."""
        await self.state.synced()
        self.wake(Wake.TIMER)
        try:
            while True:
                await self.wakeups.wait()
                await self.step(self.wakeups.take())
        finally:
            await self.drains.stop()

    async def step(self, reasons: set[Wake]) -> None:
        """One pass, for these reasons."""
        body = self.state.clusters.get(self.cluster)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return  # going: whoever runs the agent stops it
        look = bool(reasons & LOOK)
        if look:
            self.wakeups.after(PROBE_INTERVAL, Wake.TIMER)
            self.failures.begin_look()
        try:
            await self._step(body, reasons, look)
        finally:
            if look:
                self.failures.end_look()
        await self._write_status(body)

    async def _step(self, body: Obj, reasons: set[Wake], look: bool) -> None:
        if look and not self.namespace_ready:
            self.namespace_ready = bool(await self._attempt("namespace", self._namespace()))
        connection = None
        driver = body["spec"]["driver"]
        if driver not in drivers.PROVISIONED or driver in drivers.HOSTED:
            connection = await self._attempt("credential", self._connection())
        self.connection = connection
        if connection is None:
            self.probe, self.node_list = None, []
            if reasons & PROJECT_SYNC:
                await self._sync_projects(None, None, False, body["spec"])
            return
        pods = None
        if look or self.probe is None:
            self.probe = await health.probe(connection)
            if self.probe.reachable:
                pods = await self._attempt("pod list", health.list_pods(connection.client))
                self.totals = observe.pod_totals(pods) if pods is not None else self.totals
        if not claims.unclaimed(body):
            self.duplicate_of = None
        elif look and self.probe.reachable:
            self.duplicate_of = await self._attempt("claim", self._claim(body, connection))
        node_informer = namespace_informer = None
        if self.probe.reachable:
            node_informer = await self._informer("node list", NODES, look)
            namespace_informer = await self._informer("namespace list", NAMESPACES, look)
        self.node_list = node_informer.all() if node_informer is not None else []
        if node_informer is not None and reasons & NODE_SYNC:
            synced = self.nodes.sync(connection.client, self.node_list, self.totals)
            self.failures.replace("node ", await self._attempt("nodes", synced) or {})
        if node_informer is not None and pods is not None:
            # Before the pools: a quantity it changes is acted on in the same pass.
            synced_scaler = self.autoscaler.sync(connection.client, node_informer, pods)
            await self._attempt("autoscaler", synced_scaler)
        hosted = driver in drivers.HOSTED
        if node_informer is not None and hosted and reasons & CERTIFICATE_SYNC:
            await self._approve_kubelets(connection.client, look)
        if node_informer is not None and reasons & POOL_SYNC:
            synced_pools = self.pools.sync(connection, node_informer)
            if await self._attempt("node pools", synced_pools) is not False:
                self.wakeups.after(POOL_RETRY, Wake.POOL)
        if reasons & PROJECT_SYNC:
            client = connection.client if namespace_informer is not None else None
            await self._sync_projects(client, namespace_informer, self.probe.ready, body["spec"])

    async def _approve_kubelets(self, client: AsyncClient, look: bool) -> None:
        requests = await self._informer("certificate requests", CERTIFICATES, look)
        if requests is not None:
            approving = kubelets.approve_pending(
                self.cluster, self.state, client, requests.all(), self.node_list
            )
            await self._attempt("kubelet certificates", approving)

    async def _sync_projects(
        self,
        client: AsyncClient | None,
        namespaces: Informer | None,
        ready: bool,
        cluster_spec: Obj,
    ) -> None:
        pending = await self._attempt(
            "projects", self.projects.run(client, namespaces, ready, cluster_spec)
        )
        if pending:
            self.wakeups.after(self.retry, Wake.RETRY)
            self.retry = min(self.retry * 2, PROBE_INTERVAL)
        else:
            self.retry = RETRY_MIN

    async def _write_status(self, body: Obj) -> None:
        """What this pass and the last look saw, with the failures standing."""
        connection = self.connection
        try:
            await self.health.write_status(
                self.state.clusters.get(self.cluster) or body,
                connection.credential if connection is not None else None,
                self.probe,
                self.node_list,
                self.totals,
                dict(self.failures.current),
                self.duplicate_of,
                self._agent(),
            )
        except Exception as exc:  # noqa: BLE001 - cannot go into the status it failed to write
            log.warning("cluster %s: status write failed: %s", self.cluster, nodes.describe(exc))

    def _agent(self) -> observe.Agent | None:
        """For a cluster reached through its agent: whether its tunnel is held, from its
        Lease (renewed every 5 s; the timer's look notices one that stopped)."""
        connections = self.state.connections
        credential = connections.credential(self.cluster)
        if credential is None or not credential.tunnel:
            return None
        holding = connections.relays.holding(self.cluster)
        if holding is None or not holding.fresh(self.state.clock()):
            return observe.Agent(connected=False)
        return observe.Agent(connected=True, version=holding.version, image=holding.image)

    async def _connection(self) -> Connection | None:
        """The cluster's connection; None while it has no credential."""
        try:
            return await self.state.connections.connection(self.cluster)
        except Unavailable:
            return None

    async def _informer(self, what: str, watched: Watched, look: bool) -> Informer | None:
        """One of the cluster's informers. On a full look, one whose watch is down lists again
        here, so that why it fails shows on the cluster."""

        def factory(client: AsyncClient) -> Informer:
            return Informer(
                client,
                watched.resource,
                name=f"cluster {self.cluster} {watched.name}",
                on_change=lambda event, obj: self.wake(watched.reason),
            )

        made = self.state.connections.informer(self.cluster, watched.name, factory)
        informer = await self._attempt(what, made)
        if informer is not None and look and not informer.watching:
            await self._attempt(what, informer.relist())
        return informer

    async def _claim(self, body: Obj, connection: Connection) -> str | None:
        """Claim a cluster imported before claims existed, as an import does now; the Cluster
        that has the claim already, when it is another one."""
        identity = await agent.identify(connection.credential)
        other = await claims.backfill(self.state.kube, identity, body)
        if other != self.duplicate_of:
            if other is not None:
                log.warning("cluster %s: the same cluster is imported as %s", self.cluster, other)
            else:
                log.info("cluster %s: claimed its cluster %s", self.cluster, identity)
        return other

    async def _namespace(self) -> bool:
        """Node CRs, projects and cluster role bindings live in a namespace named after the
        cluster."""
        await ensure_namespace(self.state.kube, self.cluster, {names.LABEL_CLUSTER: self.cluster})
        return True

    async def _attempt(self, what: str, work: Awaitable[T]) -> T | None:
        """One sync of the pass; its outcome is recorded for the cluster's conditions."""
        try:
            result = await work
        except Exception as exc:  # noqa: BLE001 - reported on the cluster, never fatal
            self.failures.record(what, nodes.describe(exc))
            return None
        self.failures.record(what, None)
        return result
