"""The node pools of one cluster: each kept at its quantity of machines (docs/operator.md,
"Node pools"), on every pass of the cluster's agent.

A machine is a Node CR in the cluster's namespace named as the node mirror names the CR of
its hostname (`names.node_cr_name`), so that once the node registers the mirror shows it on
the same record (Registered, Ready, the node's fields, desired taints applied) and never
removes it (it is not the mirror's). The CR is created first, owned by its pool and holding
FINALIZER_MACHINE; its creation is recorded on it before the driver is asked
(`corral.core.drivers.machines`), so an operator stopped at any point neither leaks nor
duplicates a machine. Until its node registers, this reconciler writes the record's
Initialized, Provisioned and Registered with its own field manager; the pool's status
(counts, conditions, last error) is its own too.

Nothing removes a machine but `remove` here: the pool holds FINALIZER_NODE_POOL while it has
machines and each record FINALIZER_MACHINE, so deleting a pool scales it to zero first
(draining when it says so), and deleting a record removes its machine (and the pool makes
another). `remove_all` is for a cluster that is going.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.types import PatchType

from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.conditions import Condition
from corral.core.drivers import machines
from corral.core.drivers.templates import MachineInputs
from corral.core.errors import Invalid, NotFound, Unavailable
from corral.core.kube import finalizers, joining, kinds, registration_tokens
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.connections import Connection
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.core.kube.templates import machine_inputs
from corral.core.nodepools import labels as pool_labels
from corral.core.nodepools import plan as pool_plan
from corral.core.nodepools import status as pool_status
from corral.core.registration import tokens
from corral.core.times import format_time, parse_time
from corral.operator.downstream.nodes import describe
from corral.operator.drivers.contract import JoinConfig, Machine, MachineRequest, NodeDriver, Phase
from corral.operator.drivers.registry import Drivers
from corral.operator.state import BY_CLUSTER, State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-node-pools"
# Rancher's drain defaults for a node removed from its pool (provisioning.md 3.3).
DRAIN_INPUT = {"force": True, "deleteLocalData": True, "gracePeriod": 60,
               "ignoreDaemonSets": True, "timeout": 60}  # fmt: skip


def pool_of(record: Obj) -> str:
    return str((record.get("spec") or {}).get("nodePoolName", ""))


def marked_to_go(record: Obj) -> bool:
    """Whether the autoscaler chose this machine to go (names.ANNOTATION_DELETE_MACHINE)."""
    return names.ANNOTATION_DELETE_MACHINE in (record["metadata"].get("annotations") or {})


class Templates:
    """Each template's machine inputs and connected driver, once per pass: a pass over a pool
    of a hundred machines reads its template, credential, Secret and NodeDriver (and re-hashes
    the driver's executable) once, not a hundred times."""

    def __init__(self, state: State, drivers: Drivers, cluster: str) -> None:
        self.state = state
        self.drivers = drivers
        self.cluster = cluster
        self._read: dict[str, MachineInputs] = {}
        self._connected: dict[str, NodeDriver] = {}

    async def inputs(self, template: str) -> MachineInputs:
        if template not in self._read:
            self._read[template] = await machine_inputs(self.state.kube, template)
        return self._read[template]

    async def driver(self, template: str, client: AsyncClient | None) -> NodeDriver:
        if template not in self._connected:
            inputs = await self.inputs(template)
            self._connected[template] = await self.drivers.connect(inputs, self.cluster, client)
        return self._connected[template]


class PoolSync:
    def __init__(self, cluster: str, state: State, writer: StatusWriter, drivers: Drivers) -> None:
        self.cluster = cluster
        self.state = state
        self.writer = writer
        self.drivers = drivers

    async def sync(self, connection: Connection, nodes: Informer) -> bool:
        """One pass over the cluster's pools; whether work is left (a drain under way, a
        machine not registered yet)."""
        records = [r for r in self.state.nodes.by_index(BY_CLUSTER, self.cluster) if pool_of(r)]
        pools = self.state.nodepools.by_index(BY_CLUSTER, self.cluster)
        templates = Templates(self.state, self.drivers, self.cluster)
        pending = False
        for pool in pools:
            pid = str(ScopedId.of(pool))
            mine = [r for r in records if pool_of(r) == pid]
            try:
                pending |= await self._pool(connection, templates, pool, mine, nodes)
            except Exception as exc:  # noqa: BLE001 - on the pool's status; others go on
                await self._write_pool(pool, mine, nodes, describe(exc))
                pending = True
        # A record outliving its pool (its finalizer taken off by hand): its machine goes.
        known = {str(ScopedId.of(p)) for p in pools}
        for record in records:
            if pool_of(record) not in known:
                await self._remove(connection.client, templates, record)
        return pending

    async def remove_all(self, client: AsyncClient | None) -> None:
        """Every machine of the cluster's pools, then the pools' finalizers: the cluster is
        going. No drain (its workloads go with it); `client` is None when the cluster cannot
        be reached, and then only what drivers reach on their own is removed."""
        templates = Templates(self.state, self.drivers, self.cluster)
        for record in self.state.nodes.by_index(BY_CLUSTER, self.cluster):
            if pool_of(record):
                try:
                    await self._remove(client, templates, record)
                except Exception as exc:  # noqa: BLE001 - the cluster goes whatever happens
                    log.warning("cluster %s: machine %s not removed: %s", self.cluster,
                                record["metadata"]["name"], describe(exc))  # fmt: skip
        for pool in self.state.nodepools.by_index(BY_CLUSTER, self.cluster):
            await finalizers.remove(self.state.kube, kinds.NodePool, pool,
                                    names.FINALIZER_NODE_POOL)  # fmt: skip

    async def _pool(
        self,
        connection: Connection,
        templates: Templates,
        pool: Obj,
        mine: list[Obj],
        nodes: Informer,
    ) -> bool:
        spec, deleting = pool["spec"], bool(pool["metadata"].get("deletionTimestamp"))
        if not deleting:
            pool = await finalizers.add(self.state.kube, kinds.NodePool, pool,
                                        names.FINALIZER_NODE_POOL)  # fmt: skip
        now = self.state.clock()
        by_host = {r["spec"]["requestedHostname"]: r for r in mine}
        downstream = {h: n for h in by_host if (n := nodes.get(h)) is not None}
        # Records deleted are drained (when the pool says so) and removed; machines failing
        # too long are removed at once; the pool makes others for both.
        deleted = sorted(h for h, r in by_host.items() if r["metadata"].get("deletionTimestamp"))
        failed = sorted(
            h for h, r in by_host.items() if h not in deleted and pool_plan.failed_too_long(
                parse_time(r["metadata"]["creationTimestamp"]),
                (r.get("status") or {}).get("conditions") or [], now,
            )
        )  # fmt: skip
        marked = {h for h, r in by_host.items() if marked_to_go(r)}
        decided = pool_plan.plan(
            spec["hostnamePrefix"], 0 if deleting else int(spec.get("quantity", 1)),
            sorted(by_host), downstream, int(spec.get("deleteNotReadyAfterSecs") or 0), now,
            leaving={*deleted, *failed}, marked=marked,
        )  # fmt: skip
        pending = False
        errors: list[str] = []
        for hostname in [*decided.replace, *failed]:
            log.info("cluster %s: replacing %s (%s)", self.cluster, hostname,
                     "failed" if hostname in failed else "NotReady too long")  # fmt: skip
            await self._remove(connection.client, templates, by_host.pop(hostname))
        drain = bool(spec.get("drainBeforeDelete"))
        for hostname in [*deleted, *decided.remove]:
            record, node = by_host[hostname], downstream.get(hostname)
            # The autoscaler moves the pods of the node it chose, as upstream evicts them.
            if await self._drained(record, drain or hostname in marked, node):
                await self._remove(connection.client, templates, record)
                by_host.pop(hostname)
            else:
                pending = True
        if decided.add:
            inputs = await templates.inputs(spec["nodeTemplateName"])
            if await self.drivers.usable(inputs.driver):
                for hostname in decided.add:
                    by_host[hostname] = await self._create_record(pool, inputs, hostname)
            else:
                errors.append(f"node driver {inputs.driver} is not active and ready: "
                              f"{len(decided.add)} machine(s) not made")  # fmt: skip
        for hostname, record in list(by_host.items()):
            node = downstream.get(hostname)
            if node is not None:
                await self._label(connection.client, node, pool)
                continue
            pending = True
            try:
                machine = await self._provision(connection, templates, pool, record)
            except Unavailable as exc:  # asked again on the next pass
                errors.append(f"{hostname}: {exc.message}")
                continue
            except Invalid as exc:
                errors.append(f"{hostname}: {exc.message}")
                await self._write_machine(record, None, exc.message)
                continue
            if machine is None:
                log.info("cluster %s: machine of %s is gone; making another", self.cluster,
                         hostname)  # fmt: skip
                await self._remove(connection.client, templates, by_host.pop(hostname))
                continue
            if machine.phase is Phase.FAILED:
                errors.append(f"{hostname}: {machine.message or 'the machine failed'}")
            await self._write_machine(record, machine, "")
        if deleting and not by_host:
            await finalizers.remove(self.state.kube, kinds.NodePool, pool,
                                    names.FINALIZER_NODE_POOL)  # fmt: skip
            return pending
        await self._write_pool(pool, list(by_host.values()), nodes, "; ".join(errors))
        return pending

    # -- machines -------------------------------------------------------------------------------

    async def _create_record(self, pool: Obj, inputs: MachineInputs, hostname: str) -> Obj:
        """The machine's record, before anything else of it exists."""
        spec = pool["spec"]
        meta = ObjectMeta(
            name=names.node_cr_name(hostname),
            namespace=self.cluster,
            ownerReferences=[owner_reference(pool)],
            finalizers=[names.FINALIZER_MACHINE],
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
        self, connection: Connection, templates: Templates, pool: Obj, record: Obj
    ) -> Machine | None:
        """Take the machine one step towards registering: the machine as its driver sees it
        now; None when a machine that was made is gone."""
        meta = record["metadata"]
        inputs = await templates.inputs(record["spec"]["nodeTemplateName"])
        driver = await templates.driver(record["spec"]["nodeTemplateName"], connection.client)
        call = machines.next_call(meta.get("annotations") or {})
        if call is machines.Call.OBSERVE:
            return await driver.observe(meta["name"])
        machine = await driver.observe(meta["name"]) if call is machines.Call.SETTLE else None
        if machine is None:
            if call is machines.Call.CREATE:
                record = await self._annotate(record, names.ANNOTATION_CREATE_PENDING)
            request = await self._request(connection, pool, inputs, record)
            machine = await driver.create(request)
        await self._annotate(record, names.ANNOTATION_CREATE_SUCCEEDED)
        return machine

    async def _request(
        self, connection: Connection, pool: Obj, inputs: MachineInputs, record: Obj
    ) -> MachineRequest:
        spec, name = pool["spec"], record["metadata"]["name"]
        hostname = record["spec"]["requestedHostname"]
        token = await joining.issue(connection.client, name, hostname)
        credential = connection.credential
        join = JoinConfig(
            server=credential.server, ca_cert=credential.ca_cert or b"", token=token,
            labels={**pool_labels.machine_labels(pool["metadata"]["name"], spec),
                    names.LABEL_MACHINE: name},
            taints=tuple(record["spec"].get("desiredNodeTaints") or ()),
            command=await self._node_command(name, inputs.driver),
        )  # fmt: skip
        return MachineRequest(name, self.cluster, hostname, inputs.config, join,
                              credential=inputs.credential)  # fmt: skip

    async def _node_command(self, record: str, driver: str) -> str:
        """The node command of a registration token of the machine's own; none without
        corral's URL, nor for kwok's simulated machines, which run nothing."""
        corral = self.state.corral
        if corral is None or driver == names.KWOK_DRIVER:
            return ""
        value = await registration_tokens.issue_for_machine(
            self.state.kube, self.cluster, record, self.state.clock()
        )
        return corral.node_command(value)

    async def _drained(self, record: Obj, drain: bool, node: Obj | None) -> bool:
        """Whether the machine may go now: drained first when asked (never an etcd node; a
        failed drain does not keep it); False while its drain is under way."""
        spec, status = record.get("spec") or {}, record.get("status") or {}
        if not drain or node is None or spec.get("etcd"):
            return True
        requested = (spec.get("nodeDrainInput") or {}).get("requestedAt")
        if spec.get("desiredNodeUnschedulable") != "drain" or not requested:
            drain_input = {**DRAIN_INPUT, "requestedAt": format_time(self.state.clock())}
            await self._patch(record, {"spec": {"desiredNodeUnschedulable": "drain",
                                                "nodeDrainInput": drain_input}})  # fmt: skip
            return False
        return bool(status.get("drainRequest") == requested)

    async def _remove(self, client: AsyncClient | None, templates: Templates, record: Obj) -> None:
        """The machine through its driver, its node and join credential downstream, then its
        record. A machine whose template is gone cannot be reached: said in the log."""
        meta = record["metadata"]
        name, template = meta["name"], record["spec"].get("nodeTemplateName", "")
        driver: NodeDriver | None = None
        try:
            driver = await templates.driver(template, client)
        except NotFound:
            log.warning("cluster %s: machine %s left to its driver: template %s is gone",
                        self.cluster, name, template)  # fmt: skip
        if driver is not None:
            await driver.delete(name)
        if client is not None:
            async for node in client.list(DownstreamNode, labels={names.LABEL_MACHINE: name}):
                if node.metadata and node.metadata.name:
                    await delete_if_present(client, DownstreamNode, node.metadata.name)
            await joining.revoke(client, name)
        await registration_tokens.delete_named(
            self.state.kube, self.cluster, tokens.machine_token_name(name)
        )
        await finalizers.remove(self.state.kube, kinds.Node, record, names.FINALIZER_MACHINE)
        await delete_if_present(self.state.kube, kinds.Node, name, namespace=self.cluster)
        self.state.nodes.forget(f"{self.cluster}/{name}")

    async def _label(self, client: AsyncClient, node: Obj, pool: Obj) -> None:
        """The pool's labels (its name among them) and annotations on its node (others are
        left alone). A real machine registers with its pool's name only: the kubelet refuses
        to start with labels of `kubernetes.io` it does not know, which `nodeLabels` may hold."""
        meta, spec = node["metadata"], pool["spec"]
        wanted = {"labels": pool_labels.machine_labels(pool["metadata"]["name"], spec),
                  "annotations": spec.get("nodeAnnotations") or {}}  # fmt: skip
        patch: dict[str, Any] = {}
        for current, items in wanted.items():
            have = meta.get(current) or {}
            want = {k: v for k, v in items.items() if have.get(k) != v}
            if want:
                patch[current] = want
        if patch:
            await client.patch(DownstreamNode, meta["name"], {"metadata": patch},
                               patch_type=PatchType.MERGE)  # fmt: skip

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

    async def _write_machine(self, record: Obj, machine: Machine | None, refused: str) -> None:
        """The record's conditions before its node registers: Provisioned from the machine's
        phase, or False with why its driver refused it."""
        written = await self.writer.apply(
            kinds.Node, record["metadata"]["name"], self.cluster, seen=record,
            conditions=[
                Condition.of(ct.INITIALIZED, True, ct.REASON_INITIALIZED),
                provisioned(machine, refused),
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


def provisioned(machine: Machine | None, refused: str) -> Condition:
    if refused:
        return Condition.of(ct.PROVISIONED, False, ct.REASON_MACHINE_FAILED, refused)
    if machine is None:
        return Condition(ct.PROVISIONED, "Unknown", ct.REASON_CREATE_PENDING)
    if machine.phase is Phase.FAILED:
        return Condition.of(ct.PROVISIONED, False, ct.REASON_MACHINE_FAILED,
                            machine.message or "the machine failed")  # fmt: skip
    if machine.phase is Phase.RUNNING:
        return Condition.of(ct.PROVISIONED, True, ct.REASON_PROVISIONED)
    return Condition(ct.PROVISIONED, "Unknown", ct.REASON_PROVISIONING, machine.message)


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
