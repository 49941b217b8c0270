"""The node pools of one cluster: each kept at its quantity of machines (docs/operator.md,
"Node pools"), on every pass of the cluster's agent.

A machine is a Node CR in the cluster's namespace named as the node mirror names the CR of
its hostname (`observe.node_cr_name`), so that once the node registers the mirror shows it on
the same record (Registered, Ready, the node's fields, desired taints applied) and never
removes it (it is not the mirror's). The CR is created first, owned by its pool (deleting the
pool deletes its records); its creation is recorded on it before the driver is asked
(`corral.core.drivers.machines`), so an operator stopped at any point neither leaks nor
duplicates a machine. Until its node registers, this reconciler writes the record's
Initialized, Provisioned and Registered with its own field manager; the pool's status
(counts, conditions, last error) is its own too.

A pool's downstream machines whose record is gone (the pool was deleted) are removed here too:
the kwok driver finds them by their machine label.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.types import PatchType

from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.auth.ttl import format_time
from corral.core.clusters import observe
from corral.core.conditions import Condition
from corral.core.drivers import machines
from corral.core.drivers import status as driver_status
from corral.core.errors import Invalid
from corral.core.kube import joining, kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.connections import Connection
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.core.kube.templates import machine_inputs
from corral.core.nodepools import plan as pool_plan
from corral.core.nodepools import status as pool_status
from corral.operator.downstream.nodes import describe
from corral.operator.drivers.contract import JoinConfig, MachineRequest
from corral.operator.drivers.kwok import KwokDriver
from corral.operator.state import BY_CLUSTER, State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-node-pools"
# Rancher's drain defaults for a node removed from its pool (provisioning.md 3.3).
DRAIN_INPUT = {"force": True, "deleteLocalData": True, "gracePeriod": 60,
               "ignoreDaemonSets": True, "timeout": 60}  # fmt: skip


def pool_of(record: Obj) -> str:
    return str((record.get("spec") or {}).get("nodePoolName", ""))


class PoolSync:
    def __init__(self, cluster: str, state: State, writer: StatusWriter) -> None:
        self.cluster = cluster
        self.state = state
        self.writer = writer

    async def sync(self, connection: Connection, nodes: Informer) -> bool:
        """One pass over the cluster's pools; whether work is left (a drain under way, a
        machine not registered yet)."""
        records = [r for r in self.state.nodes.by_index(BY_CLUSTER, self.cluster) if pool_of(r)]
        pools = self.state.nodepools.by_index(BY_CLUSTER, self.cluster)
        pending = False
        driver = KwokDriver(connection.client, self.cluster)
        for pool in pools:
            pid = str(ScopedId.of(pool))
            mine = [r for r in records if pool_of(r) == pid]
            try:
                pending |= await self._pool(connection, driver, pool, mine, nodes)
            except Exception as exc:  # noqa: BLE001 - on the pool's status; others go on
                await self._write_pool(pool, mine, nodes, describe(exc))
                pending = True
        # Read again: this pass made records of its own. A record the mirror made for a
        # machine's node once the pool's was gone is no pool's.
        records = self.state.nodes.by_index(BY_CLUSTER, self.cluster)
        kept = {r["metadata"]["name"] for r in records if pool_of(r)}
        await self._sweep(driver, nodes, kept)
        return pending

    async def _pool(
        self,
        connection: Connection,
        driver: KwokDriver,
        pool: Obj,
        mine: list[Obj],
        nodes: Informer,
    ) -> bool:
        spec = pool["spec"]
        by_host = {r["spec"]["requestedHostname"]: r for r in mine}
        downstream = {h: n for h in by_host if (n := nodes.get(h)) is not None}
        decided = pool_plan.plan(
            spec["hostnamePrefix"], int(spec.get("quantity", 1)), sorted(by_host), downstream,
            int(spec.get("deleteNotReadyAfterSecs") or 0), self.state.clock(),
        )  # fmt: skip
        pending = False
        errors: list[str] = []
        for hostname in decided.replace:
            log.info("cluster %s: replacing %s, NotReady too long", self.cluster, hostname)
            await self._remove(driver, connection.client, by_host.pop(hostname), False, None)
        drain = bool(spec.get("drainBeforeDelete"))
        for hostname in decided.remove:
            record = by_host[hostname]
            if await self._remove(
                driver, connection.client, record, drain, downstream.get(hostname)
            ):
                by_host.pop(hostname)
            else:
                pending = True
        if decided.add and await self._driver_usable(spec["nodeTemplateName"]):
            for hostname in decided.add:
                by_host[hostname] = await self._create_record(pool, hostname)
        for hostname, record in by_host.items():
            node = downstream.get(hostname)
            if node is None:
                failure = await self._provision(connection, driver, pool, record)
                errors += [failure] if failure else []
                pending = True
            else:
                await self._label(connection.client, node, spec)
        await self._write_pool(pool, list(by_host.values()), nodes, "; ".join(errors))
        return pending

    # -- machines -------------------------------------------------------------------------------

    async def _create_record(self, pool: Obj, hostname: str) -> Obj:
        """The machine's record, before anything else of it exists."""
        spec = pool["spec"]
        inputs = await machine_inputs(self.state.kube, spec["nodeTemplateName"])
        meta = ObjectMeta(
            name=observe.node_cr_name(hostname),
            namespace=self.cluster,
            ownerReferences=[owner_reference(pool)],
        )
        body = {
            "requestedHostname": hostname,
            "nodePoolName": str(ScopedId.of(pool)),
            "nodeTemplateName": spec["nodeTemplateName"],
            **{role: bool(spec.get(role)) for role in ("etcd", "controlPlane", "worker")},
            "desiredNodeTaints": [*(spec.get("nodeTaints") or []), *inputs.taints],
        }
        created = as_dict(await self.state.kube.create(kinds.Node(metadata=meta, spec=body)))
        self.state.nodes.put(created)
        return created

    async def _provision(
        self, connection: Connection, driver: KwokDriver, pool: Obj, record: Obj
    ) -> str:
        """Take the machine one step towards registering; why it failed, or ""."""
        meta = record["metadata"]
        call = machines.next_call(meta.get("annotations") or {})
        failure = ""
        if call is machines.Call.SETTLE and await driver.observe(meta["name"]) is not None:
            record = await self._annotate(record, names.ANNOTATION_CREATE_SUCCEEDED)
        elif call is not machines.Call.OBSERVE:
            if call is machines.Call.CREATE:
                record = await self._annotate(record, names.ANNOTATION_CREATE_PENDING)
            try:
                await driver.create(await self._request(connection, pool, record))
            except Invalid as exc:
                failure = f"{record['spec']['requestedHostname']}: {exc.message}"
            else:
                record = await self._annotate(record, names.ANNOTATION_CREATE_SUCCEEDED)
        await self._write_machine(record, failure)
        return failure

    async def _request(self, connection: Connection, pool: Obj, record: Obj) -> MachineRequest:
        spec, name = pool["spec"], record["metadata"]["name"]
        hostname = record["spec"]["requestedHostname"]
        inputs = await machine_inputs(self.state.kube, spec["nodeTemplateName"])
        token = await joining.issue(connection.client, name, hostname)
        credential = connection.credential
        join = JoinConfig(
            server=credential.server, ca_cert=credential.ca_cert or b"", token=token,
            labels={**(spec.get("nodeLabels") or {}),
                    names.LABEL_NODE_POOL: pool["metadata"]["name"]},
            taints=tuple(record["spec"].get("desiredNodeTaints") or ()),
        )  # fmt: skip
        return MachineRequest(name, self.cluster, hostname, inputs.config, join,
                              credential=inputs.credential)  # fmt: skip

    async def _remove(
        self,
        driver: KwokDriver,
        client: AsyncClient,
        record: Obj,
        drain: bool,
        node: Obj | None,
    ) -> bool:
        """Remove one machine, drained first when asked (never an etcd node; a failed drain
        does not keep it); False while its drain is under way."""
        spec, status = record.get("spec") or {}, record.get("status") or {}
        if drain and node is not None and not spec.get("etcd"):
            requested = (spec.get("nodeDrainInput") or {}).get("requestedAt")
            if spec.get("desiredNodeUnschedulable") != "drain" or not requested:
                now = format_time(self.state.clock())
                drain_input = {**DRAIN_INPUT, "requestedAt": now}
                patch = {
                    "spec": {"desiredNodeUnschedulable": "drain", "nodeDrainInput": drain_input}
                }
                await self._patch(record, patch)
                return False
            if status.get("drainRequest") != requested:
                return False
        name = record["metadata"]["name"]
        await driver.delete(name)
        await joining.revoke(client, name)
        await delete_if_present(self.state.kube, kinds.Node, name, namespace=self.cluster)
        self.state.nodes.forget(f"{self.cluster}/{name}")
        return True

    async def _sweep(self, driver: KwokDriver, nodes: Informer, records: set[str]) -> None:
        """Machines of a pool that was deleted (its records with it)."""
        pools = {
            p["metadata"]["name"] for p in self.state.nodepools.by_index(BY_CLUSTER, self.cluster)
        }
        for node in nodes.all():
            labels = node["metadata"].get("labels") or {}
            machine, pool = labels.get(names.LABEL_MACHINE), labels.get(names.LABEL_NODE_POOL)
            if machine and pool and pool not in pools and machine not in records:
                log.info("cluster %s: removing machine %s of deleted pool %s", self.cluster,
                         machine, pool)  # fmt: skip
                await driver.delete(machine)
                await joining.revoke(driver.client, machine)

    async def _label(self, client: AsyncClient, node: Obj, spec: Mapping[str, Any]) -> None:
        """The pool's labels and annotations on its node (others are left alone)."""
        meta = node["metadata"]
        patch: dict[str, Any] = {}
        for field, current in (("nodeLabels", "labels"), ("nodeAnnotations", "annotations")):
            have = meta.get(current) or {}
            want = {k: v for k, v in (spec.get(field) or {}).items() if have.get(k) != v}
            if want:
                patch[current] = want
        if patch:
            await client.patch(DownstreamNode, meta["name"], {"metadata": patch},
                               patch_type=PatchType.MERGE)  # fmt: skip

    async def _driver_usable(self, template: str) -> bool:
        """New machines only while the template's driver is active: deactivating a driver
        stops scale-ups and replacements, and leaves the machines there alone."""
        found = await self.state.kube.get(kinds.NodeTemplate, template)
        driver = as_dict(found).get("spec", {}).get("driver", "")
        if driver != names.KWOK_DRIVER:
            # Executable drivers keep the same contract; their machines are not made yet.
            raise Invalid(f"node driver {driver}: pools make only kwok machines so far")
        return driver_status.usable(as_dict(await self.state.kube.get(kinds.NodeDriver, driver)))

    async def _annotate(self, record: Obj, annotation: str) -> Obj:
        now = format_time(self.state.clock())
        return await self._patch(record, {"metadata": {"annotations": {annotation: now}}})

    async def _patch(self, record: Obj, patch: dict[str, Any]) -> Obj:
        meta = record["metadata"]
        patched = as_dict(await self.state.kube.patch(
            kinds.Node, meta["name"], patch, namespace=self.cluster, patch_type=PatchType.MERGE
        ))  # fmt: skip
        self.state.nodes.put(patched)
        return patched

    # -- status ---------------------------------------------------------------------------------

    async def _write_machine(self, record: Obj, failure: str) -> None:
        annotations = record["metadata"].get("annotations") or {}
        created = bool(annotations.get(names.ANNOTATION_CREATE_SUCCEEDED))
        if failure:
            provisioned = Condition.of(ct.PROVISIONED, False, ct.REASON_MACHINE_FAILED, failure)
        elif created:
            provisioned = Condition.of(ct.PROVISIONED, True, ct.REASON_PROVISIONED)
        else:
            provisioned = Condition(ct.PROVISIONED, "Unknown", ct.REASON_CREATE_PENDING)
        written = await self.writer.apply(
            kinds.Node, record["metadata"]["name"], self.cluster, seen=record,
            conditions=[
                Condition.of(ct.INITIALIZED, True, ct.REASON_INITIALIZED),
                provisioned,
                Condition.of(ct.REGISTERED, False, ct.REASON_WAITING_FOR_NODE,
                             "the machine's node has not joined yet"),
            ],
        )  # fmt: skip
        if written is not None:
            self.state.nodes.put(written)

    async def _write_pool(
        self, pool: Obj, mine: Sequence[Obj], nodes: Informer, error: str
    ) -> None:
        counts = count(mine, nodes)
        quantity = int(pool["spec"].get("quantity", 1))
        last = error or ((pool.get("status") or {}).get("lastError", "") if counts.failing else "")
        written = await self.writer.apply(
            kinds.NodePool, pool["metadata"]["name"], self.cluster, seen=pool,
            conditions=pool_status.pool_conditions(quantity, counts, last),
            fields={**counts.as_status(), "lastError": last,
                    "observedGeneration": pool["metadata"].get("generation")},
        )  # fmt: skip
        if written is not None:
            self.state.nodepools.put(written)


def count(records: Sequence[Obj], nodes: Informer) -> pool_status.Counts:
    ready = failing = 0
    for record in records:
        node = nodes.get(record["spec"]["requestedHostname"])
        conds = (record.get("status") or {}).get("conditions") or []
        if any(c.get("reason") == ct.REASON_MACHINE_FAILED for c in conds):
            failing += 1
        elif node is not None and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        ):
            ready += 1
    return pool_status.Counts(len(records), len(records) - ready - failing, ready, failing)


def owner_reference(pool: Obj) -> OwnerReference:
    meta = pool["metadata"]
    return OwnerReference(apiVersion=names.API_VERSION, kind=names.NODE_POOL.kind,
                          name=meta["name"], uid=meta["uid"])  # fmt: skip
