"""Clusters: observe each downstream cluster and mirror its nodes.

One daemon per Cluster on the active replica. It holds ONE watch on the cluster's nodes,
probes `/readyz` and `/version` every few seconds, lists pods (one call) for requests and
limits, and writes the Cluster's status and the Node CRs when what it computes changes.
An unreachable cluster turns Ready False at the next probe and recovers by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import aiohttp
import kopf
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Namespace, Pod, Secret
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from lightkube.types import PatchType

from corral.core import conditions
from corral.core.api import names
from corral.core.clusters import observe
from corral.core.clusters.credential import Credential
from corral.core.clusters.importing import AGENT_NAME, AGENT_NAMESPACE
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.credential import client_for, session_for
from corral.operator import connections, nodes, projects
from corral.operator.mirror import Mirror

log = logging.getLogger(__name__)

PROBE_INTERVAL = 5.0
RETRY_INTERVAL = 5.0
T = TypeVar("T")


@kopf.daemon(names.GROUP, names.VERSION, names.CLUSTER.plural, cancellation_timeout=10)
async def observe_cluster(
    name: str, body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **kwargs: Any
) -> None:
    wakeup = memo.setdefault("wakeups", {}).setdefault(name, asyncio.Event())
    sync = projects.ProjectSync(memo.kube, name, projects.Indices.of(kwargs))
    observer = Observer(memo.kube, name, body, wakeup, sync)
    try:
        await observer.run(stopped)
    finally:
        memo.wakeups.pop(name, None)


@kopf.on.event(names.GROUP, names.VERSION, names.CLUSTER.plural)
async def wake_on_change(name: str, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """A changed spec (enableNetworkPolicy, say) is acted on at once, not at the next probe."""
    generation = body["metadata"].get("generation")
    seen = memo.setdefault("cluster_generations", {})
    if seen.get(name) != generation:
        seen[name] = generation
        wakeup = memo.get("wakeups", {}).get(name)
        if wakeup is not None:
            wakeup.set()


@kopf.on.delete(names.GROUP, names.VERSION, names.CLUSTER.plural)
async def forget_cluster(name: str, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a cluster removes everything corral keeps for it: its namespace (with the
    Node CRs), its credential, and corral's service account in the cluster."""
    kube: AsyncClient = memo.kube
    credential = await connections.credential(kube, name)
    if credential is not None and name != names.LOCAL_CLUSTER:
        await remove_agent(credential)
    await delete_if_present(kube, Namespace, name)
    with contextlib.suppress(ApiError):
        await kube.delete(
            Secret, names.credential_secret_name(name), namespace=names.SYSTEM_NAMESPACE
        )


async def remove_agent(credential: Credential) -> None:
    """Best effort: an unreachable cluster must not block its deletion."""
    client = client_for(credential, timeout=5)
    try:
        # The namespace first: the binding is what allows deleting it.
        await delete_if_present(client, Namespace, AGENT_NAMESPACE)
        await delete_if_present(client, ClusterRoleBinding, AGENT_NAME)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("could not remove corral from the cluster: %s", exc)
    finally:
        await client.close()


class Observer:
    """Everything the daemon of one cluster keeps between passes."""

    def __init__(
        self,
        kube: AsyncClient,
        cluster: str,
        body: kopf.Body,
        wakeup: asyncio.Event,
        sync: projects.ProjectSync,
    ) -> None:
        self.kube = kube
        self.cluster = cluster
        self.body = body  # kopf keeps a daemon's body current: no GET per pass
        self.driver = body["spec"]["driver"]
        self.wakeup = wakeup
        self.projects = sync
        self.namespace_ready: bool | None = False
        # What failed in this pass and in the last one (what -> why).
        self.failures: dict[str, str] = {}
        self.reported: dict[str, str] = {}

    async def run(self, stopped: kopf.DaemonStopped) -> None:
        while not stopped:
            if not self.namespace_ready:
                self.namespace_ready = await self._attempt("namespace", self._ensure_namespace())
            credential = None
            if self.driver not in observe.PROVISIONING_DRIVERS:
                credential = await self._attempt(
                    "credential", connections.credential(self.kube, self.cluster)
                )
            client = self._connect(credential) if credential is not None else None
            if credential is None or client is None:
                await self._sync_projects(None, None, ready=False)
                await self._finish_pass(None, None, [], {})
                await self._sleep(RETRY_INTERVAL * 6, stopped)
                continue
            nodes = Mirror(client, DownstreamNode, f"cluster {self.cluster} nodes", self.wakeup.set)
            namespaces = Mirror(
                client, Namespace, f"cluster {self.cluster} namespaces", self.wakeup.set
            )
            # The cluster's watches: they keep nodes and namespaces current between probes.
            watches = [asyncio.create_task(m.run()) for m in (nodes, namespaces)]
            try:
                await self._observe(credential, client, nodes, namespaces, stopped)
            finally:
                for watch in watches:
                    watch.cancel()
                await asyncio.gather(*watches, return_exceptions=True)
                await client.close()

    async def _observe(
        self,
        credential: Credential,
        client: AsyncClient,
        node_mirror: Mirror,
        namespaces: Mirror,
        stopped: kopf.DaemonStopped,
    ) -> None:
        """Every sync of a pass runs whatever the others did: one that fails is reported on
        the cluster's `Updated` condition (and a node's on that node), never fatal."""
        while not stopped:
            probe = await self._probe(credential)
            totals: dict[str, observe.PodTotals] = {}
            if probe.reachable:
                for mirror, what in ((node_mirror, "node list"), (namespaces, "namespace list")):
                    if not mirror.watching:
                        await self._attempt(what, mirror.relist())
                totals = await self._attempt("pod list", self._pod_totals(client)) or {}
            node_list = list(node_mirror.objects.values())
            if probe.reachable:
                synced = nodes.sync(self.kube, client, self.cluster, node_list, totals)
                for node, why in (await self._attempt("nodes", synced) or {}).items():
                    self._fail(f"node {node}", why)
                await self._sync_projects(client, namespaces, probe.ready)
            else:
                await self._sync_projects(None, None, ready=False)
            await self._finish_pass(credential, probe, node_list, totals)
            await self._sleep(PROBE_INTERVAL, stopped)

    async def _pod_totals(self, client: AsyncClient) -> dict[str, observe.PodTotals]:
        return observe.pod_totals([as_dict(p) async for p in client.list(Pod, namespace="*")])

    async def _sync_projects(
        self, client: AsyncClient | None, namespaces: Mirror | None, ready: bool
    ) -> None:
        isolate = bool(self.body["spec"].get("enableNetworkPolicy"))
        await self._attempt("projects", self.projects.run(client, namespaces, ready, isolate))

    def _connect(self, credential: Credential) -> AsyncClient | None:
        try:
            return client_for(credential)
        except Exception as exc:  # noqa: BLE001 - a stored credential that cannot be used
            self._fail("credential", nodes.describe(exc))
            return None

    async def _attempt(self, what: str, work: Awaitable[T]) -> T | None:
        """One sync of the pass; its failure is recorded for the cluster's conditions."""
        try:
            return await work
        except Exception as exc:  # noqa: BLE001 - reported on the cluster, never fatal
            self._fail(what, nodes.describe(exc))
            return None

    def _fail(self, what: str, why: str) -> None:
        # Logged when it starts or changes, not on every pass it goes on failing.
        if self.reported.get(what) != why:
            log.warning("cluster %s: %s failed: %s", self.cluster, what, why)
        self.failures[what] = why

    async def _finish_pass(
        self,
        credential: Credential | None,
        probe: observe.Probe | None,
        node_list: list[dict[str, Any]],
        totals: dict[str, observe.PodTotals],
    ) -> None:
        """Write what the pass saw, with its failures, and start the next one afresh."""
        for what in set(self.reported) - set(self.failures):
            log.info("cluster %s: %s works again", self.cluster, what)
        failures, self.reported, self.failures = self.failures, self.failures, {}
        try:
            await self.write_status(credential, probe, node_list, totals, failures)
        except Exception as exc:  # noqa: BLE001 - cannot go into the status it failed to write
            log.warning("cluster %s: status write failed: %s", self.cluster, nodes.describe(exc))

    async def _probe(self, credential: Credential) -> observe.Probe:
        try:
            async with session_for(credential, timeout=PROBE_INTERVAL) as session:
                async with session.get("version") as response:
                    if response.status in (401, 403):
                        return observe.Probe(
                            True,
                            False,
                            f"HTTP {response.status} from the "
                            "cluster: corral's credential was refused",
                            credential_rejected=True,
                        )
                    version = await response.json()
                async with session.get("readyz") as response:
                    text = (await response.text()).strip()
                    ready = response.status == 200
                    version = version if isinstance(version, dict) else None
                    return observe.Probe(True, ready, "" if ready else text[-500:], False, version)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            message = f"cannot reach {credential.server}: {exc or type(exc).__name__}"
            return observe.Probe(False, False, message)

    async def write_status(
        self,
        credential: Credential | None,
        probe: observe.Probe | None,
        node_list: list[dict[str, Any]],
        totals: dict[str, observe.PodTotals],
        failures: dict[str, str],
    ) -> None:
        current = dict(self.body.get("status") or {})
        status: dict[str, Any] = {"driver": self.driver}
        if credential is not None and probe is not None and probe.reachable:
            status |= observe.cluster_status(
                self.driver, credential.server, credential.ca_cert, node_list, totals, probe
            )
        observed = observe.cluster_conditions(
            self.driver, credential is not None, probe, node_list, failures
        )
        generation = self.body["metadata"].get("generation")
        status["conditions"] = conditions.merge(
            current.get("conditions") or [], observed, _now(), generation
        )
        status["observedGeneration"] = generation
        merged = {**current, **status}
        if merged == current:
            return
        await self.kube.patch(
            kinds.Cluster.Status, self.cluster, {"status": status}, patch_type=PatchType.MERGE
        )

    async def _ensure_namespace(self) -> bool:
        """Node CRs, projects and cluster role bindings live in a namespace named after the
        cluster."""
        await ensure_namespace(self.kube, self.cluster, {names.LABEL_CLUSTER: self.cluster})
        return True

    async def _sleep(self, seconds: float, stopped: kopf.DaemonStopped) -> None:
        """Until the next pass: the interval, a node event, or a Node CR change."""
        self.wakeup.clear()

        async def until_stopped() -> None:
            await stopped.wait()

        waiters = [asyncio.create_task(self.wakeup.wait()), asyncio.create_task(until_stopped())]
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
