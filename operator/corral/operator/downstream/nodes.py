"""The node mirror: each downstream node has a Node CR that shows it, and the node is made to
match what the CR asks for (`desiredNodeTaints`, `desiredNodeUnschedulable`); drains are
started from here (`drain`).

The mirror labels the records it creates (`names.LABEL_NODE_SOURCE`) and, once their node is
gone, deletes those and only those: a record it did not make (a node pool's machine still being
created) is not its to remove. Its status writes are the field manager `corral-node-mirror`'s:
the node's fields, and the conditions Initialized, Provisioned, Registered, Ready and Updated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.types import PatchType

from corral.core.api import names
from corral.core.clusters import observe, taints
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.operator.downstream.drain import Drains
from corral.operator.state import BY_CLUSTER

FIELD_MANAGER = "corral-node-mirror"
# A failure's message, as kept in a condition: enough to say what and why.
MAX_FAILURE = 1024
MIRRORED = {names.LABEL_NODE_SOURCE: names.NODE_SOURCE_MIRROR}


def describe(exc: BaseException) -> str:
    """Why something failed, for a condition and the log: the cluster's own message or the
    error's text, never the request (whose headers carry a credential)."""
    if isinstance(exc, ApiError):
        message = f"{exc.status.reason or exc.status.code}: {exc.status.message}"
    elif isinstance(exc, taints.InvalidTaint):
        message = str(exc)
    else:
        message = f"{type(exc).__name__}: {exc}"
    return message[:MAX_FAILURE]


def mirrored(record: Obj) -> bool:
    """Whether the mirror made this record."""
    labels = record["metadata"].get("labels") or {}
    return labels.get(names.LABEL_NODE_SOURCE) == names.NODE_SOURCE_MIRROR


class NodeMirror:
    def __init__(
        self,
        cluster: str,
        kube: AsyncClient,
        records: Informer,
        writer: StatusWriter,
        drains: Drains,
    ) -> None:
        self.cluster = cluster
        self.kube = kube
        self.records = records
        self.writer = writer
        self.drains = drains

    async def sync(
        self,
        downstream: AsyncClient,
        nodes: Sequence[Obj],
        totals: Mapping[str, observe.PodTotals],
    ) -> dict[str, str]:
        """One pass over the cluster's nodes; idempotent. A node that fails stops neither the
        others nor the removal of records of nodes that are gone: the failures are returned,
        by downstream node, for the cluster's conditions."""
        existing = {
            r["metadata"]["name"]: r for r in self.records.by_index(BY_CLUSTER, self.cluster)
        }
        failures: dict[str, str] = {}
        wanted = set()
        for node in nodes:
            name = names.node_cr_name(node["metadata"]["name"])
            wanted.add(name)
            try:
                failure = await self.sync_node(downstream, existing.get(name), node, totals)
            except Exception as exc:  # noqa: BLE001 - reported, and the other nodes go on
                failure = describe(exc)
            if failure:
                failures[node["metadata"]["name"]] = failure
        for name in set(existing) - wanted:
            if not mirrored(existing[name]):
                continue
            try:
                await delete_if_present(self.kube, kinds.Node, name, namespace=self.cluster)
            except Exception as exc:  # noqa: BLE001 - as above
                failures[name] = f"cannot remove its record: {describe(exc)}"
            else:
                self.records.forget(f"{self.cluster}/{name}")
        return failures

    async def sync_node(
        self,
        downstream: AsyncClient,
        record: Obj | None,
        node: Obj,
        totals: Mapping[str, observe.PodTotals],
    ) -> str:
        """Mirror one node and apply its CR; why applying failed (also on the Node's
        `Updated`), or "" when it did not."""
        if record is None:
            record = await self._create(node)
        failure = ""
        try:
            node = await apply_desired(downstream, record, node)
        except Exception as exc:  # noqa: BLE001 - shown on the node, which is still mirrored
            failure = describe(exc)
        record = await self._write_status(record, node, totals, failure)
        await self.drains.reconcile(downstream, record, node["metadata"]["name"])
        return failure

    async def _create(self, node: Obj) -> Obj:
        meta = ObjectMeta(
            name=names.node_cr_name(node["metadata"]["name"]),
            namespace=self.cluster,
            labels=dict(MIRRORED),
        )
        created = as_dict(
            await self.kube.create(kinds.Node(metadata=meta, spec=observe.node_spec(node)))
        )
        self.records.put(created)
        return created

    async def _write_status(
        self,
        record: Obj,
        node: Obj,
        totals: Mapping[str, observe.PodTotals],
        failure: str,
    ) -> Obj:
        pending = [] if failure else pending_changes(record.get("spec") or {}, node)
        written = await self.writer.apply(
            kinds.Node,
            record["metadata"]["name"],
            self.cluster,
            seen=record,
            conditions=observe.node_conditions(node, not pending, "; ".join(pending), failure),
            fields=observe.node_status(node, totals.get(node["metadata"]["name"])),
        )
        if written is None:
            return record
        self.records.put(written)
        return written


async def apply_desired(downstream: AsyncClient, record: Mapping[str, Any], node: Obj) -> Obj:
    """Make the downstream node match the CR's desired taints and schedulability; raises
    InvalidTaint for stored taints the cluster would refuse (a CR written around the API)."""
    spec, node_spec = record.get("spec") or {}, node.get("spec") or {}
    patch: dict[str, Any] = {}
    desired = spec.get("desiredNodeUnschedulable", "")
    if desired:
        unschedulable = desired in ("true", "drain")
        if bool(node_spec.get("unschedulable", False)) != unschedulable:
            patch["unschedulable"] = unschedulable
    if spec.get("desiredNodeTaints") is not None:
        wanted = taints.parse(spec["desiredNodeTaints"])
        current = node_spec.get("taints") or []
        if _taint_keys(observe.desired_taints(current, wanted)) != _taint_keys(current):
            patch["taints"] = observe.desired_taints(current, wanted)
    if not patch:
        return node
    updated = await downstream.patch(
        DownstreamNode, node["metadata"]["name"], {"spec": patch}, patch_type=PatchType.MERGE
    )
    return as_dict(updated)


def _taint_keys(taints: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    return {(t.get("key", ""), t.get("value", "") or "", t.get("effect", "")) for t in taints}


def pending_changes(spec: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    """What the node does not (yet) match of its CR's desired state."""
    node_spec = node.get("spec") or {}
    pending = []
    desired = spec.get("desiredNodeUnschedulable", "")
    if desired and bool(node_spec.get("unschedulable", False)) != (desired in ("true", "drain")):
        pending.append(f"unschedulable should be {desired in ('true', 'drain')}")
    if spec.get("desiredNodeTaints") is not None:
        wanted = _taint_keys(
            observe.desired_taints(node_spec.get("taints") or [], spec["desiredNodeTaints"])
        )
        if wanted != _taint_keys(node_spec.get("taints") or []):
            pending.append("taints differ from desiredNodeTaints")
    return pending
