"""Nodes: mirror each downstream node into a Node CR, apply what the CR asks for
(`desiredNodeTaints`, `desiredNodeUnschedulable`), and drain on request.

A drain is asked for with `desiredNodeUnschedulable: drain` and `nodeDrainInput` (the API's
`drain` action writes both, with a fresh `requestedAt`). The node is cordoned, its pods are
evicted through the Eviction API (so PodDisruptionBudgets hold), and the `Drained` condition
says how it went. `status.drainRequest` records which request the condition answers.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.clusters import observe, taints
from corral.core.conditions import Condition
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present

log = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT = 120
EVICTION_RETRY = 1.0
# A failure's message, as kept in a condition: enough to say what and why.
MAX_FAILURE = 1024
# Drains in progress, by (cluster, node CR).
_drains: dict[tuple[str, str], asyncio.Task[None]] = {}
# Why the latest eviction attempt failed, by downstream node: the message of a timed-out drain.
_last_blocker: dict[str, str] = {}


@kopf.on.event(names.GROUP, names.VERSION, names.NODE.plural)
async def wake_cluster(namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    """A changed Node CR (a new taint, a cordon) is applied at the cluster's next pass: now."""
    wakeup = memo.get("wakeups", {}).get(namespace)
    if wakeup is not None:
        wakeup.set()


async def sync(
    kube: AsyncClient,
    downstream: AsyncClient,
    cluster: str,
    node_list: list[dict[str, Any]],
    totals: Mapping[str, observe.PodTotals],
) -> dict[str, str]:
    """One pass over the cluster's nodes; idempotent. A node that fails stops neither the
    others nor the removal of records of nodes that are gone: the failures are returned, by
    downstream node, for the cluster's conditions."""
    existing = {
        n["metadata"]["name"]: n
        for n in [as_dict(o) async for o in kube.list(kinds.Node, namespace=cluster)]
    }
    failures: dict[str, str] = {}
    wanted = set()
    for node in node_list:
        name = observe.node_cr_name(node["metadata"]["name"])
        wanted.add(name)
        try:
            failure = await sync_node(kube, downstream, cluster, existing.get(name), node, totals)
        except Exception as exc:  # noqa: BLE001 - reported, and the other nodes go on
            failure = describe(exc)
        if failure:
            failures[node["metadata"]["name"]] = failure
    for name in set(existing) - wanted:
        try:
            await delete_if_present(kube, kinds.Node, name, namespace=cluster)
        except Exception as exc:  # noqa: BLE001 - as above
            failures[name] = f"cannot remove its record: {describe(exc)}"
    return failures


async def sync_node(
    kube: AsyncClient,
    downstream: AsyncClient,
    cluster: str,
    record: dict[str, Any] | None,
    node: dict[str, Any],
    totals: Mapping[str, observe.PodTotals],
) -> str:
    """Mirror one node and apply its CR; why applying failed (also on the Node's `Updated`),
    or "" when it did not."""
    if record is None:
        meta = ObjectMeta(name=observe.node_cr_name(node["metadata"]["name"]), namespace=cluster)
        created = await kube.create(kinds.Node(metadata=meta, spec=observe.node_spec(node)))
        record = as_dict(created)
    failure = ""
    try:
        node = await apply_desired(downstream, record, node)
    except Exception as exc:  # noqa: BLE001 - shown on the node, which is still mirrored
        failure = describe(exc)
    await write_status(kube, downstream, cluster, record, node, totals, failure)
    return failure


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


async def apply_desired(
    downstream: AsyncClient, record: Mapping[str, Any], node: dict[str, Any]
) -> dict[str, Any]:
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


async def write_status(
    kube: AsyncClient,
    downstream: AsyncClient,
    cluster: str,
    record: Mapping[str, Any],
    node: Mapping[str, Any],
    totals: Mapping[str, observe.PodTotals],
    failure: str = "",
) -> None:
    spec, current = record.get("spec") or {}, record.get("status") or {}
    name = record["metadata"]["name"]
    pending = [] if failure else pending_changes(spec, node)
    observed = observe.node_conditions(node, not pending, "; ".join(pending), failure)
    status = observe.node_status(node, totals.get(node["metadata"]["name"]))
    drain = spec.get("nodeDrainInput") or {}
    if spec.get("desiredNodeUnschedulable") == "drain":
        request = str(drain.get("requestedAt", ""))
        if request != current.get("drainRequest") and (cluster, name) not in _drains:
            _drains[(cluster, name)] = asyncio.create_task(
                run_drain(kube, downstream, cluster, name, node["metadata"]["name"], drain)
            )
    elif conditions.is_true(current.get("conditions") or [], ct.DRAINED):
        observed.append(
            Condition.of(ct.DRAINED, False, ct.REASON_UNCORDONED, "the node takes pods again")
        )
    status["conditions"] = conditions.merge(
        current.get("conditions") or [], observed, _now(), record["metadata"].get("generation")
    )
    if {**current, **status} != current:
        await kube.patch(
            kinds.Node.Status,
            name,
            {"status": status},
            namespace=cluster,
            patch_type=PatchType.MERGE,
        )


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


# -- drain ------------------------------------------------------------------------------------


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


async def run_drain(
    kube: AsyncClient,
    downstream: AsyncClient,
    cluster: str,
    record: str,
    node_name: str,
    drain: Mapping[str, Any],
) -> None:
    timeout = int(drain.get("timeout") or DEFAULT_DRAIN_TIMEOUT)
    try:
        outcome = await asyncio.wait_for(drain_node(downstream, node_name, drain), timeout)
    except TimeoutError:
        outcome = Condition.of(
            ct.DRAINED,
            False,
            ct.REASON_DRAIN_TIMED_OUT,
            f"not done after {timeout}s: "
            + _last_blocker.get(node_name, "pods are still terminating"),
        )
    except DrainRefused as exc:
        outcome = Condition.of(ct.DRAINED, False, ct.REASON_DRAIN_REFUSED, str(exc))
    except Exception as exc:  # noqa: BLE001 - reported in the condition, never lost
        outcome = Condition.of(ct.DRAINED, False, ct.REASON_DRAIN_FAILED, str(exc))
    finally:
        _drains.pop((cluster, record), None)
        _last_blocker.pop(node_name, None)
    current = as_dict(await kube.get(kinds.Node, record, namespace=cluster))
    status = {
        "drainRequest": str(drain.get("requestedAt", "")),
        "conditions": conditions.merge(
            (current.get("status") or {}).get("conditions") or [], [outcome], _now()
        ),
    }
    await kube.patch(
        kinds.Node.Status,
        record,
        {"status": status},
        namespace=cluster,
        patch_type=PatchType.MERGE,
    )


async def drain_node(
    downstream: AsyncClient, node_name: str, drain: Mapping[str, Any]
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
    options = DeleteOptions(gracePeriodSeconds=grace) if grace is not None and grace >= 0 else None
    remaining = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in targets}
    while remaining:
        for namespace, name in sorted(remaining):
            try:
                eviction = Pod.Eviction(
                    metadata=ObjectMeta(name=name, namespace=namespace), deleteOptions=options
                )
                await downstream.create(eviction, name, namespace=namespace)
                remaining.discard((namespace, name))
            except ApiError as exc:
                if exc.status.code == 404:
                    remaining.discard((namespace, name))
                elif exc.status.code == 429:  # a PodDisruptionBudget says not now
                    _last_blocker[node_name] = (
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


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
