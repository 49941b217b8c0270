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
from typing import Any

import aiohttp
import kopf
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Pod, Secret
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from lightkube.types import PatchType

from corral.core import conditions, resources
from corral.core.clusters import observe
from corral.core.clusters.credential import Credential
from corral.core.clusters.importing import AGENT_NAME, AGENT_NAMESPACE
from corral.core.kube import as_dict, delete_if_present
from corral.operator import connections, nodes

log = logging.getLogger(__name__)

PROBE_INTERVAL = 5.0
RETRY_INTERVAL = 5.0


@kopf.daemon(resources.GROUP, resources.VERSION, "clusters", cancellation_timeout=10)
async def observe_cluster(
    name: str, body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    wakeup = memo.setdefault("wakeups", {}).setdefault(name, asyncio.Event())
    observer = Observer(memo.kube, name, body, wakeup)
    try:
        await observer.run(stopped)
    finally:
        memo.wakeups.pop(name, None)


@kopf.on.delete(resources.GROUP, resources.VERSION, "clusters")
async def forget_cluster(name: str, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a cluster removes everything corral keeps for it: its namespace (with the
    Node CRs), its credential, and corral's service account in the cluster."""
    kube: AsyncClient = memo.kube
    credential = await connections.credential(kube, name)
    if credential is not None and name != resources.LOCAL_CLUSTER:
        await remove_agent(credential)
    await delete_if_present(kube, Namespace, name)
    with contextlib.suppress(ApiError):
        await kube.delete(
            Secret, resources.credential_secret_name(name), namespace=resources.SYSTEM_NAMESPACE
        )


async def remove_agent(credential: Credential) -> None:
    """Best effort: an unreachable cluster must not block its deletion."""
    client = credential.client(timeout=5)
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

    def __init__(self, kube: AsyncClient, cluster: str, body: kopf.Body, wakeup: asyncio.Event):
        self.kube = kube
        self.cluster = cluster
        self.body = body  # kopf keeps a daemon's body current: no GET per pass
        self.driver = body["spec"]["driver"]
        self.wakeup = wakeup
        self.nodes: dict[str, dict[str, Any]] = {}
        self.watching = False
        self.last_status: dict[str, Any] | None = None

    async def run(self, stopped: kopf.DaemonStopped) -> None:
        await self._ensure_namespace()
        while not stopped:
            credential = None
            if self.driver not in observe.PROVISIONING_DRIVERS:
                credential = await connections.credential(self.kube, self.cluster)
            if credential is None:
                await self.write_status(None, None, [], {})
                await self._sleep(RETRY_INTERVAL * 6, stopped)
                continue
            client = credential.client()
            watch = asyncio.create_task(self._watch_nodes(client))
            try:
                await self._observe(credential, client, stopped)
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
                await client.close()

    async def _observe(
        self, credential: Credential, client: AsyncClient, stopped: kopf.DaemonStopped
    ) -> None:
        while not stopped:
            probe = await self._probe(credential)
            totals: dict[str, observe.PodTotals] = {}
            if probe.reachable and not self.watching:
                await self._relist(client)
            if probe.reachable:
                try:
                    pods = [as_dict(p) async for p in client.list(Pod, namespace="*")]
                    totals = observe.pod_totals(pods)
                except Exception as exc:  # noqa: BLE001 - next pass tries again
                    log.info("cluster %s: cannot list pods: %s", self.cluster, exc)
            node_list = list(self.nodes.values())
            await self.write_status(credential, probe, node_list, totals)
            if probe.reachable:
                await nodes.sync(self.kube, client, self.cluster, node_list, totals)
            await self._sleep(PROBE_INTERVAL, stopped)

    async def _probe(self, credential: Credential) -> observe.Probe:
        try:
            async with credential.session(timeout=PROBE_INTERVAL) as session:
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
                    return observe.Probe(True, ready, "" if ready else text[-500:], False, version)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self.watching = False
            message = f"cannot reach {credential.server}: {exc or type(exc).__name__}"
            return observe.Probe(False, False, message)

    async def _relist(self, client: AsyncClient) -> None:
        listed = [as_dict(o) async for o in client.list(DownstreamNode)]
        self.nodes = {n["metadata"]["name"]: n for n in listed}

    async def _watch_nodes(self, client: AsyncClient) -> None:
        """The one watch connection to the cluster: keeps `nodes` current between probes."""
        while True:
            try:
                listing = client.list(DownstreamNode)
                fresh = {}
                async for obj in listing:
                    data = as_dict(obj)
                    fresh[data["metadata"]["name"]] = data
                self.nodes, self.watching = fresh, True
                async for event, obj in client.watch(
                    DownstreamNode, resource_version=listing.resourceVersion, server_timeout=300
                ):
                    data = as_dict(obj)
                    if event == "DELETED":
                        self.nodes.pop(data["metadata"]["name"], None)
                    else:
                        self.nodes[data["metadata"]["name"]] = data
                    self.wakeup.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - relist after any watch failure
                self.watching = False
                log.info("cluster %s: node watch ended: %s", self.cluster, exc)
                await asyncio.sleep(RETRY_INTERVAL)

    async def write_status(
        self,
        credential: Credential | None,
        probe: observe.Probe | None,
        node_list: list[dict[str, Any]],
        totals: dict[str, observe.PodTotals],
    ) -> None:
        current = dict(self.body.get("status") or {})
        status: dict[str, Any] = {"driver": self.driver}
        if credential is not None and probe is not None and probe.reachable:
            status |= observe.cluster_status(
                self.driver, credential.server, credential.ca_cert, node_list, totals, probe
            )
        observed = observe.cluster_conditions(self.driver, credential is not None, probe, node_list)
        generation = self.body["metadata"].get("generation")
        status["conditions"] = conditions.merge(
            current.get("conditions") or [], observed, _now(), generation
        )
        status["observedGeneration"] = generation
        merged = {**current, **status}
        if merged == current:
            return
        await self.kube.patch(
            resources.Cluster.Status, self.cluster, {"status": status}, patch_type=PatchType.MERGE
        )

    async def _ensure_namespace(self) -> None:
        """Node CRs live in a namespace named after the cluster."""
        try:
            await self.kube.create(
                Namespace(
                    metadata=ObjectMeta(
                        name=self.cluster, labels={"management.svc.io/cluster": self.cluster}
                    )
                )
            )
        except ApiError as exc:
            if exc.status.code != 409:
                raise

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
