"""The agent of one downstream cluster: its connection (from the registry), its informers on
the cluster's nodes, namespaces and pods, and what it keeps in step with them: the cluster's
health, the node mirror and its drains, the projects' objects in the cluster.

It makes a pass when woken, and each pass does what its reasons call for. At rest it costs
one watch per kind and a probe: every `PROBE_INTERVAL` it asks the API server `/readyz`; a
node's change runs the node mirror, a pod's (as far as the totals and the autoscaler read it)
the mirror's totals and the autoscaler, a namespace's, project's, binding's or the cluster
spec's the project sync (the spec's also a registered cluster's agent settings); pools and the
autoscaler also ask for a pass every `PROBE_INTERVAL` while the cluster has any (their rules
wait on time). A full look (probe with `/version`,
claim, every sync) comes with a new credential, when the probe's answer changes, and every
`RESYNC_INTERVAL` in case an event was missed; while anything fails, every `PROBE_INTERVAL`. A
pass that leaves work pending asks for the next one soon. The cluster's status is written
after a pass whose inputs changed, and only when it changes.

Every sync of a pass runs whatever the others did: one that fails is reported on the cluster's
`Updated` condition (and a node's on that node) until it runs again and works, and at the
latest until the next full look; it is never fatal.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lightkube import AsyncClient
from lightkube.resources.certificates_v1 import CertificateSigningRequest
from lightkube.resources.core_v1 import Namespace, Pod, Secret
from lightkube.resources.core_v1 import Node as DownstreamNode

from corral.core.api import drivers, names
from corral.core.clusters import observe
from corral.core.errors import Unavailable
from corral.core.kube import agent, claims
from corral.core.kube.client import ensure_namespace
from corral.core.kube.connections import Connection
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.core.projects.downstream import Key
from corral.core.workloads import pods
from corral.operator.downstream import (
    agentsettings,
    autoscaler,
    drain,
    health,
    kubelets,
    nodes,
    pools,
    projects,
)
from corral.operator.drivers.registry import Drivers
from corral.operator.state import BY_CLUSTER, State
from corral.operator.wakeups import Wake, Wakeups

log = logging.getLogger(__name__)

PROBE_INTERVAL = 5.0
# A full look at a cluster where nothing fails: only for what a watch could have missed.
RESYNC_INTERVAL = 300.0
# After a pass that left work pending: the first retry, doubled while it stays pending.
RETRY_MIN = 0.25
# Pods change in bursts (a rollout): one pass for all that changed within this long.
POD_SETTLE = 1.0
# While the cluster has pools with bounds: how often the autoscaler's rules are asked again.
AUTOSCALE_INTERVAL = 5.0
T = TypeVar("T")

LOOK = {Wake.TIMER, Wake.CREDENTIAL}
NODE_SYNC = LOOK | {Wake.NODE, Wake.POD}
PROJECT_SYNC = LOOK | {Wake.NAMESPACE, Wake.PROJECT, Wake.SPEC, Wake.RETRY, Wake.OWNED}
POOL_SYNC = LOOK | {Wake.NODE, Wake.POOL}
AUTOSCALER_SYNC = LOOK | {Wake.NODE, Wake.POD, Wake.POOL, Wake.AUTOSCALE}
CERTIFICATE_SYNC = LOOK | {Wake.NODE, Wake.CERTIFICATE}
AGENT_SETTINGS_SYNC = LOOK | {Wake.SPEC}
# While a pool's machine is on its way (created, draining): how soon the pool is looked at.
POOL_RETRY = 1.0


@dataclass(frozen=True)
class Watched:
    """A kind the agent keeps an informer on in its cluster, what it keeps of each object,
    and the wake-up its changes give: at once, or after `settle` seconds for a burst."""

    resource: Any
    name: str
    reason: Wake
    keep: Callable[[Obj], Obj] | None = None
    settle: float = 0.0
    labels: dict[str, Any] | None = None
    namespace: str | None = None
    fields: dict[str, Any] | None = None
    # Each listing wakes the agent too: for a watch to which finding nothing is news.
    wake_on_list: bool = False


NODES = Watched(DownstreamNode, "nodes", Wake.NODE, keep=observe.observed_node)
NAMESPACES = Watched(Namespace, "namespaces", Wake.NAMESPACE)
PODS = Watched(Pod, "pods", Wake.POD, keep=pods.for_scheduling, settle=POD_SETTLE, namespace="*")
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
        # The watches on Secrets of someone else's that hold project secrets' copies back.
        self.held: dict[Key, Informer] = {}
        # What the last passes saw, for the cluster's status.
        self.connection: Connection | None = None
        self.probe: observe.Probe | None = None
        self.node_list: list[Obj] = []
        self.totals: dict[str, observe.PodTotals] = {}
        # The versions of the node and pod informers that node_list and totals are of.
        self._nodes_of: int | None = None
        self._totals_of: int | None = None
        # What the last status written was computed from: the same again writes nothing.
        self._status_of: tuple[Any, ...] | None = None
        # The Cluster that has this cluster's claim, when it is not this one.
        self.duplicate_of: str | None = None
        self.retry = RETRY_MIN
        # Set when the status may have changed; one writer, apart from the passes.
        self.status_due = asyncio.Event()

    def wake(self, reason: Wake) -> None:
        self.wakeups.add(reason)

    def progressed(self) -> None:
        """The provisioner changed the cluster's progress: shown at once, not after a pass that
        may be waiting out probes of a control plane that is down, and looked at again."""
        self.status_due.set()
        self.wake(Wake.TIMER)

    async def run(self) -> None:
        """Pass after pass, until cancelled; the status is written beside the passes."""
        await self.state.synced()
        self.wake(Wake.TIMER)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._show_status())
                while True:
                    await self.wakeups.wait()
                    await self.step(self.wakeups.take())
        finally:
            await self.drains.stop()

    async def _show_status(self) -> None:
        while True:
            await self.status_due.wait()
            self.status_due.clear()
            body = self.state.clusters.get(self.cluster)
            if body is not None and not body["metadata"].get("deletionTimestamp"):
                await self._write_status(body)

    async def step(self, reasons: set[Wake]) -> None:
        """One pass, for these reasons."""
        body = self.state.clusters.get(self.cluster)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return  # going: whoever runs the agent stops it
        look = bool(reasons & LOOK)
        if look:
            self.failures.begin_look()
        try:
            await self._step(body, reasons, look)
        finally:
            if look:
                self.failures.end_look()
            # An earlier full look stands: one that failed asks for the next soon.
            failing = bool(self.failures.current)
            self.wakeups.after(PROBE_INTERVAL if failing else RESYNC_INTERVAL, Wake.TIMER)
            self.status_due.set()

    async def _step(self, body: Obj, reasons: set[Wake], look: bool) -> None:
        if look and not self.namespace_ready:
            self.namespace_ready = bool(await self._attempt("namespace", self._namespace()))
        connection = None
        driver = body["spec"]["driver"]
        if driver not in drivers.PROVISIONED or driver in drivers.HOSTED:
            connection = await self._attempt("credential", self._connection())
        self.connection = connection
        if connection is None:
            self.probe, self.node_list, self._nodes_of = None, [], None
            if reasons & PROJECT_SYNC:
                await self._sync_projects(None, None, False, body["spec"])
            return
        probe = self.probe
        if look or Wake.PROBE in reasons or probe is None:
            probe = self.probe = await self._probe(connection, look)
        if not claims.unclaimed(body):
            self.duplicate_of = None
        elif probe.reachable and (look or self.duplicate_of is None):
            # At once, not at the next full look: an unclaimed cluster could be imported a
            # second time meanwhile. A duplicate found stays so until the next look.
            self.duplicate_of = await self._attempt("claim", self._claim(body, connection))
        node_informer = namespace_informer = pod_informer = None
        if probe.reachable:
            node_informer = await self._informer("node list", NODES, look)
            namespace_informer = await self._informer("namespace list", NAMESPACES, look)
            pod_informer = await self._informer("pod list", PODS, look)
        self.node_list = node_informer.all() if node_informer is not None else []
        self._nodes_of = node_informer.version if node_informer is not None else None
        if pod_informer is not None and pod_informer.version != self._totals_of:
            self.totals = observe.pod_totals(pod_informer.all())
            self._totals_of = pod_informer.version
        if node_informer is not None and reasons & NODE_SYNC:
            synced = self.nodes.sync(connection.client, self.node_list, self.totals)
            self.failures.replace("node ", await self._attempt("nodes", synced) or {})
        if node_informer is not None and pod_informer is not None and reasons & AUTOSCALER_SYNC:
            # Before the pools: a quantity it changes is acted on in the same pass.
            scaling = self.autoscaler.sync(connection.client, node_informer, pod_informer.all())
            if await self._attempt("autoscaler", scaling):
                self.wakeups.after(AUTOSCALE_INTERVAL, Wake.AUTOSCALE)
        hosted = driver in drivers.HOSTED
        if node_informer is not None and hosted and reasons & CERTIFICATE_SYNC:
            await self._approve_kubelets(connection.client, look)
        if node_informer is not None and reasons & POOL_SYNC:
            synced_pools = self.pools.sync(connection, node_informer)
            if await self._attempt("node pools", synced_pools) is not False:
                self.wakeups.after(POOL_RETRY, Wake.POOL)
            elif self.state.nodepools.by_index(BY_CLUSTER, self.cluster):
                # Their rules wait on time too: a node not ready for long, a machine failed
                # for long.
                self.wakeups.after(PROBE_INTERVAL, Wake.POOL)
        if reasons & PROJECT_SYNC:
            client = connection.client if namespace_informer is not None else None
            await self._sync_projects(client, namespace_informer, probe.ready, body["spec"], look)
        if connection.credential.tunnel and probe.reachable and reasons & AGENT_SETTINGS_SYNC:
            rolled = agentsettings.sync(self.cluster, connection.client, body["spec"])
            await self._attempt("agent settings", rolled)

    async def _probe(self, connection: Connection, look: bool) -> observe.Probe:
        """Ask the API server whether it is ready; on a full look, and while it is not, its
        version too (a version changes only with a restart). A change of either calls for a
        full look at once: what the projects say depends on it, and whatever happened while
        the cluster was away was not seen."""
        before = self.probe
        back = before is not None and not before.ready
        probe = await health.probe(connection, with_version=look or back or before is None)
        if probe.reachable and probe.version is None and before is not None:
            probe = dataclasses.replace(probe, version=before.version)
        self.wakeups.after(PROBE_INTERVAL, Wake.PROBE)
        moved = before is not None and (before.reachable, before.ready) != (
            probe.reachable,
            probe.ready,
        )
        if moved and not look:
            self.wake(Wake.TIMER)
        return probe

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
        look: bool = False,
    ) -> None:
        owned = None
        if client is not None and namespaces is not None:
            owned = await self._owned(look)
        synced = self.projects.run(client, namespaces, owned, ready, cluster_spec, self.held)
        pending = await self._attempt("projects", synced)
        if client is not None:
            await self._hold()
        if pending:
            self.wakeups.after(self.retry, Wake.RETRY)
            self.retry = min(self.retry * 2, PROBE_INTERVAL)
        else:
            self.retry = RETRY_MIN
        if (conflicts := self.projects.conflicts_retry_in()) is not None:
            self.wakeups.after(conflicts, Wake.RETRY)

    async def _owned(self, look: bool) -> dict[str, Informer] | None:
        """The informers of what the project sync writes, by kind; None until all answer."""
        found: dict[str, Informer] = {}
        for owned in self.projects.owned:
            watched = Watched(
                owned.resource,
                owned.plural,
                Wake.OWNED,
                keep=functools.partial(projects.owned_record, owned.kind),
                labels=owned.labels,
                namespace=owned.namespace,
            )
            informer = await self._informer(f"{owned.plural} list", watched, look)
            if informer is None:
                return None
            found[owned.kind] = informer
        return found

    async def _hold(self) -> None:
        """Watches on the Secrets of someone else's that hold copies back (`projects.held`),
        each by name, so that the copy is tried the moment one goes; those no longer in the
        way are dropped. They list in the background: the pass never waits on one, and one
        that cannot list is left to the project sync's retry and shows on no condition (it is
        a shortcut, not part of the cluster's health)."""
        connections = self.state.connections
        wanted = self.projects.held()
        for name in connections.informers(self.cluster):
            if name.startswith(projects.HELD) and name not in wanted:
                await connections.drop_informer(self.cluster, name)
        held: dict[Key, Informer] = {}
        for name, key in wanted.items():
            _, namespace, secret = key
            # Listed after the Secret went, the watch sees nothing go: its listing wakes too.
            watched = Watched(Secret, name, Wake.OWNED, keep=functools.partial(
                projects.owned_record, "Secret"), namespace=namespace,
                fields={"metadata.name": secret}, wake_on_list=True)  # fmt: skip
            try:
                held[key] = await connections.informer(
                    self.cluster, name, self._factory(watched), wait=False
                )
            except Unavailable:
                return  # the connection went meanwhile: the retry stands in
        self.held = held

    async def _write_status(self, body: Obj) -> None:
        """What this pass and the last look saw, with the failures standing."""
        connection = self.connection
        current = self.state.clusters.get(self.cluster) or body
        credential = connection.credential if connection is not None else None
        failures = dict(self.failures.current)
        agent = self._agent()
        # The cluster's own resourceVersion moves with every write (ours included), so a
        # status computed from the same inputs is the same status, already written. The
        # agent's tunnel is an input too: its Lease goes stale with time alone.
        inputs = (current["metadata"].get("resourceVersion"), credential, self.probe,
                  self._nodes_of, self.totals, failures, self.duplicate_of, agent)  # fmt: skip
        if inputs == self._status_of:
            return
        try:
            await self.health.write_status(current, credential, self.probe, self.node_list,
                                           self.totals, failures, self.duplicate_of,
                                           agent)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - cannot go into the status it failed to write
            log.warning("cluster %s: status write failed: %s", self.cluster, nodes.describe(exc))
            return
        self._status_of = inputs

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
        made = self.state.connections.informer(self.cluster, watched.name, self._factory(watched))
        informer = await self._attempt(what, made)
        if informer is not None and look and not informer.watching:
            await self._attempt(what, informer.relist())
        return informer

    def _factory(self, watched: Watched) -> Callable[[AsyncClient], Informer]:
        def changed(event: str, obj: Obj) -> None:
            if watched.settle:
                self.wakeups.after(watched.settle, watched.reason)
            else:
                self.wake(watched.reason)

        def factory(client: AsyncClient) -> Informer:
            return Informer(
                client,
                watched.resource,
                name=f"cluster {self.cluster} {watched.name}",
                namespace=watched.namespace,
                labels=watched.labels,
                fields=watched.fields,
                on_change=changed,
                on_synced=functools.partial(self.wake, watched.reason)
                if watched.wake_on_list
                else None,
                keep=watched.keep,
                share_strings=True,
            )

        return factory

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
