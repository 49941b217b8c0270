"""Draining a node on request: cordon it, evict its pods through the Eviction API (so
PodDisruptionBudgets hold), and say how it went in the Node CR's `Drained` condition.

A drain is asked for with `desiredNodeUnschedulable: drain` and `nodeDrainInput` (the API's
`drain` action writes both, with a fresh `requestedAt`). `status.drainRequest` records which
request the condition answers. Both are the field manager `corral-drain`'s, and nobody else's:
the node mirror writes the node's other conditions beside them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.conditions import Condition
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-drain"
DEFAULT_DRAIN_TIMEOUT = 120
EVICTION_RETRY = 1.0


class DrainRefused(Exception):
    """A pod blocks the drain and the drain's options do not allow removing it."""


def evictable(
    pods: Sequence[Mapping[str, Any]], drain: Mapping[str, Any]
) -> list[Mapping[str, Any]]:
    """The pods a drain must evict, as kubectl drain decides; raises DrainRefused."""
    chosen = []
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        label = f"{meta.get('namespace')}/{meta['name']}"
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
            continue  # static pods belong to the kubelet
        owners = meta.get("ownerReferences") or []
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if any(o.get("kind") == "DaemonSet" for o in owners) and not finished:
            if drain.get("ignoreDaemonSets"):
                continue
            raise DrainRefused(f"pod {label} is managed by a DaemonSet (set ignoreDaemonSets)")
        if not any(o.get("controller") for o in owners) and not finished and not drain.get("force"):
            raise DrainRefused(f"pod {label} has no controller to recreate it (set force)")
        if any("emptyDir" in v for v in spec.get("volumes") or []) and not drain.get(
            "deleteLocalData"
        ):
            raise DrainRefused(f"pod {label} has local data in emptyDir (set deleteLocalData)")
        chosen.append(pod)
    return chosen


class Drains:
    """The drains in progress on one cluster's nodes, one task per Node CR; owned by the
    cluster's agent, and stopped with it (the next agent starts an unanswered request again)."""

    def __init__(self, cluster: str, records: Informer, writer: StatusWriter) -> None:
        self.cluster = cluster
        self.records = records
        self.writer = writer
        self._running: dict[str, asyncio.Task[None]] = {}
        # Why the latest eviction attempt failed, by downstream node: the message of a
        # timed-out drain.
        self._blockers: dict[str, str] = {}

    async def reconcile(self, downstream: AsyncClient, record: Obj, node_name: str) -> None:
        """Start the drain a Node CR asks for and that is not answered yet; after an uncordon,
        say that a drained node takes pods again."""
        spec, status = record.get("spec") or {}, record.get("status") or {}
        name = record["metadata"]["name"]
        if spec.get("desiredNodeUnschedulable") == "drain":
            drain = spec.get("nodeDrainInput") or {}
            request = str(drain.get("requestedAt", ""))
            if request != status.get("drainRequest") and name not in self._running:
                self._running[name] = asyncio.create_task(
                    self._drain(downstream, name, node_name, drain)
                )
        elif conditions.is_true(status.get("conditions") or [], ct.DRAINED):
            uncordoned = Condition.of(
                ct.DRAINED, False, ct.REASON_UNCORDONED, "the node takes pods again"
            )
            await self._write(name, uncordoned, status.get("drainRequest"))

    async def stop(self) -> None:
        for task in self._running.values():
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        self._running.clear()

    async def _drain(
        self, downstream: AsyncClient, record: str, node_name: str, drain: Mapping[str, Any]
    ) -> None:
        timeout = int(drain.get("timeout") or DEFAULT_DRAIN_TIMEOUT)
        try:
            try:
                # Not wait_for, which loses a cancellation that comes as the eviction ends
                # (Python 3.11): a drain must stop when its agent does.
                async with asyncio.timeout(timeout):
                    outcome = await self._evict(downstream, node_name, drain)
            except TimeoutError:
                blocker = self._blockers.get(node_name, "pods are still terminating")
                outcome = Condition.of(
                    ct.DRAINED, False, ct.REASON_DRAIN_TIMED_OUT,
                    f"not done after {timeout}s: {blocker}",
                )  # fmt: skip
            except DrainRefused as exc:
                outcome = Condition.of(ct.DRAINED, False, ct.REASON_DRAIN_REFUSED, str(exc))
            except Exception as exc:  # noqa: BLE001 - reported in the condition, never lost
                outcome = Condition.of(ct.DRAINED, False, ct.REASON_DRAIN_FAILED, str(exc))
            finally:
                self._blockers.pop(node_name, None)
            await self._write(record, outcome, str(drain.get("requestedAt", "")))
        except Exception as exc:  # noqa: BLE001 - the request stays unanswered: tried again
            log.warning("cluster %s: cannot record the drain of %s: %s", self.cluster, record, exc)
        finally:
            # Only once the outcome is written: a pass in between would start it again.
            self._running.pop(record, None)

    async def _write(self, record: str, outcome: Condition, request: str | None) -> None:
        seen = self.records.get(f"{self.cluster}/{record}")
        if seen is None:
            return  # the record is gone
        fields = {"drainRequest": request} if request is not None else {}
        written = await self.writer.apply(
            kinds.Node, record, self.cluster, seen=seen, conditions=[outcome], fields=fields
        )
        if written is not None:
            self.records.put(written)

    async def _evict(
        self, downstream: AsyncClient, node_name: str, drain: Mapping[str, Any]
    ) -> Condition:
        await downstream.patch(
            DownstreamNode, node_name, {"spec": {"unschedulable": True}}, patch_type=PatchType.MERGE
        )
        pods = [
            as_dict(p)
            async for p in downstream.list(Pod, namespace="*", fields={"spec.nodeName": node_name})
        ]
        targets = evictable(pods, drain)
        grace = drain.get("gracePeriod")
        options = (
            DeleteOptions(gracePeriodSeconds=grace) if grace is not None and grace >= 0 else None
        )
        remaining = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in targets}
        while remaining:
            for namespace, name in sorted(remaining):
                try:
                    eviction = Pod.Eviction(
                        metadata=ObjectMeta(name=name, namespace=namespace),
                        deleteOptions=options,
                    )
                    await downstream.create(eviction, name, namespace=namespace)
                    remaining.discard((namespace, name))
                except ApiError as exc:
                    if exc.status.code == 404:
                        remaining.discard((namespace, name))
                    elif exc.status.code == 429:  # a PodDisruptionBudget says not now
                        self._blockers[node_name] = (
                            f"cannot evict pod {namespace}/{name}: {exc.status.message}"
                        )
                    else:
                        raise
            if remaining:
                await asyncio.sleep(EVICTION_RETRY)
        await _await_gone(
            downstream, {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in targets}
        )
        evicted = len(targets)
        return Condition.of(ct.DRAINED, True, ct.REASON_DRAINED, f"evicted {evicted} pod(s)")


async def _await_gone(downstream: AsyncClient, pods: set[tuple[str, str]]) -> None:
    while pods:
        for namespace, name in list(pods):
            try:
                await downstream.get(Pod, name, namespace=namespace)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
                pods.discard((namespace, name))
        if pods:
            await asyncio.sleep(EVICTION_RETRY)
