"""The autoscaler of one cluster's node pools with bounds (`autoscalingMinSize` and
`autoscalingMaxSize`; docs/provisioning.md "Autoscaling"): a sync of the agent, on its pod
and node informers, run when a pod, a node or a pool changes and every 5 s while the cluster
has pools with bounds; the rules are `corral.core.nodepools.autoscaling`'s.

It changes only `quantity`, under its own field manager (`corral-autoscaler`, on condition
that the pool's spec is still the one it decided on, as upstream patches `replicas`), and, to
scale down, the annotation `delete-machine` on the machine it chose: the pool reconciler then
drains and removes that machine. Pools without bounds are never looked at.

What it did and why goes into Events: on the NodePool (`ScaledUpGroup`, `ScaleDown`, and a
warning when a pool's node capacity is unknown) and on the pods it looked at
(`TriggeredScaleUp`, `NotTriggerScaleUp`), as upstream's do. Its timers (since when a node is
unneeded, the last scale-up) live in memory, so they start again with the operator.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from corral.core import jsonpatch, settings, times
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.guarded import GENERATION
from corral.core.kube.informer import Informer, Obj
from corral.core.nodepools import autoscaling
from corral.core.nodepools import labels as pool_labels
from corral.operator import events
from corral.operator.downstream.pools import marked_to_go, pool_of
from corral.operator.drivers import registry
from corral.operator.state import BY_CLUSTER, State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-autoscaler"
# Pods named in one event message; the rest are counted.
MAX_NAMED_PODS = 5
# Events posted on pending pods in one pass: a thousand new pods cost a thousand writes over a
# minute, not at once (upstream rate-limits its events too).
MAX_POD_EVENTS = 100


@dataclass(frozen=True)
class Knobs:
    threshold: float
    unneeded: datetime.timedelta
    delay_after_add: datetime.timedelta
    bulk: int


@dataclass(frozen=True)
class Seen:
    """What one pass looks at: the cluster's pools with bounds (by name), their machines'
    records, the groups the rules see, every node's shape and pods, the nodes that take no
    pods, whether a chosen machine is still going, and when."""

    pools: dict[str, Obj]
    records: dict[str, list[Obj]]
    groups: list[autoscaling.Group]
    shapes: dict[str, autoscaling.Shape]
    pods_on: dict[str, list[Obj]]
    closed: set[str]
    draining: bool
    now: datetime.datetime

    def group(self, name: str) -> autoscaling.Group:
        return next(g for g in self.groups if g.name == name)


def read_knobs(stored: Informer) -> Knobs:
    """The autoscaler's settings, from the operator's cache of them, at each pass."""

    def number(name: str) -> float:
        return settings.number(name, stored.get(name))

    return Knobs(
        number(settings.SCALE_DOWN_UTILIZATION_SETTING),
        datetime.timedelta(seconds=number(settings.SCALE_DOWN_UNNEEDED_SETTING)),
        datetime.timedelta(seconds=number(settings.SCALE_DOWN_DELAY_AFTER_ADD_SETTING)),
        int(number(settings.MAX_EMPTY_BULK_DELETE_SETTING)),
    )


def bounds(pool: Obj) -> tuple[int, int] | None:
    spec = pool.get("spec") or {}
    low, high = spec.get("autoscalingMinSize"), spec.get("autoscalingMaxSize")
    if isinstance(low, int) and isinstance(high, int):
        return low, high
    return None


def ready(node: Obj | None) -> bool:
    if node is None:
        return False
    found = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in found)


def listing(keys: list[str]) -> str:
    named = ", ".join(keys[:MAX_NAMED_PODS])
    more = len(keys) - MAX_NAMED_PODS
    return f"{named} and {more} more" if more > 0 else named


class Autoscaler:
    def __init__(self, cluster: str, state: State) -> None:
        self.cluster = cluster
        self.state = state
        self.since: dict[str, datetime.datetime] = {}  # unneeded node -> since when
        self.last_scale_up: datetime.datetime | None = None
        # What was last said of each pending pod (by uid) and of each pool: said once.
        self.told: dict[str, str] = {}
        self.warned: dict[str, str] = {}

    async def sync(self, client: AsyncClient, nodes: Informer, pods: list[Obj]) -> bool:
        """One pass of the rules; whether the cluster has pools with bounds, whose rules wait
        on time too (how long a node has been unneeded, since the last scale-up)."""
        pools = [
            p for p in self.state.nodepools.by_index(BY_CLUSTER, self.cluster)
            if bounds(p) is not None and not p["metadata"].get("deletionTimestamp")
        ]  # fmt: skip
        if not pools:
            self.since, self.told, self.warned = {}, {}, {}
            return False
        records = [r for r in self.state.nodes.by_index(BY_CLUSTER, self.cluster) if pool_of(r)]
        mine = {p["metadata"]["name"]: self._records(p, records) for p in pools}
        for pool in pools:
            await self._unmark_stale(pool, mine[pool["metadata"]["name"]])
        going = {r["spec"]["requestedHostname"] for r in records if leaving(r)}
        closed = {
            n["metadata"]["name"] for n in nodes.all()
            if not ready(n) or (n.get("spec") or {}).get("unschedulable")
            or n["metadata"]["name"] in going
        }  # fmt: skip
        pods_on: dict[str, list[Obj]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                pods_on.setdefault(node, []).append(pod)
        templates: dict[str, Obj | None] = {}  # read once per pass
        seen = Seen(
            {p["metadata"]["name"]: p for p in pools},
            mine,
            [await self._group(p, mine[p["metadata"]["name"]], nodes, templates) for p in pools],
            {n["metadata"]["name"]: autoscaling.node_shape(n) for n in nodes.all()},
            pods_on,
            closed,
            any(marked_to_go(r) for r in records),
            self.state.clock(),
        )
        if not await self._grow(client, seen, pods):
            await self._shrink(seen, nodes)
        return True

    async def _grow(self, client: AsyncClient, seen: Seen, pods: list[Obj]) -> bool:
        """Grow the pool that takes the unschedulable pods with least waste; whether one grew."""
        open_nodes = [
            autoscaling.Bin(shape, sum((autoscaling.pod_requests(p)
                                        for p in seen.pods_on.get(n, [])),
                                       autoscaling.Resources()))
            for n, shape in seen.shapes.items() if n not in seen.closed
        ]  # fmt: skip
        pending = autoscaling.unschedulable(pods)
        decided = autoscaling.scale_up(seen.groups, pending, open_nodes)
        await self._tell_pods(client, pending, decided)
        chosen = decided.chosen
        if chosen is None:
            return False
        pool = seen.pools[chosen.group]
        await self._set_quantity(pool, chosen.after)
        self.last_scale_up = seen.now
        await self._event(pool, "ScaledUpGroup", "Normal",
                          f"quantity {chosen.before} -> {chosen.after} (max "
                          f"{seen.group(chosen.group).maximum}) for {len(chosen.pods)} "
                          f"unschedulable pod(s): {listing(list(chosen.pods))}")  # fmt: skip
        return True

    async def _shrink(self, seen: Seen, nodes: Informer) -> None:
        """Time the unneeded nodes, and remove those whose time has come."""
        knobs = read_knobs(self.state.settings)
        candidates = [
            autoscaling.Candidate(host, name)
            for name, records in seen.records.items() for r in records
            if not leaving(r) and (host := r["spec"]["requestedHostname"]) not in seen.closed
            and (node := nodes.get(host)) is not None
            and not autoscaling.scale_down_disabled(node)
        ]  # fmt: skip
        room = {g.name: g.quantity - g.minimum for g in seen.groups}
        found = autoscaling.unneeded(
            candidates, seen.shapes, seen.pods_on, knobs.threshold, room, seen.closed
        )
        self.since = autoscaling.track(self.since, found, seen.now)
        last = self.last_scale_up
        if last is not None and seen.now - last < knobs.delay_after_add:
            return
        chosen = autoscaling.removals(
            found, self.since, seen.now, knobs.unneeded, knobs.bulk, seen.draining
        )
        by_pool: dict[str, list[str]] = {}
        for candidate in candidates:
            if candidate.node in chosen:
                by_pool.setdefault(candidate.group, []).append(candidate.node)
        for name, hostnames in sorted(by_pool.items()):
            await self._scale_down(seen, name, hostnames, found)

    def _records(self, pool: Obj, records: Iterable[Obj]) -> list[Obj]:
        pid = str(ScopedId.of(pool))
        return [r for r in records if pool_of(r) == pid]

    async def _group(
        self, pool: Obj, mine: list[Obj], nodes: Informer, templates: dict[str, Obj | None]
    ) -> autoscaling.Group:
        spec, name = pool["spec"], pool["metadata"]["name"]
        low, high = bounds(pool) or (0, 0)
        quantity = int(spec.get("quantity", 1))
        live = [r for r in mine if not leaving(r)]
        joined = sum(1 for r in live if ready(nodes.get(r["spec"]["requestedHostname"])))
        template = await self._template(pool, templates)
        return autoscaling.Group(name, quantity, low, high, template, max(0, quantity - joined))

    async def _template(
        self, pool: Obj, templates: dict[str, Obj | None]
    ) -> autoscaling.Shape | None:
        """The node a new machine of the pool would be: what the driver registry knows of the
        template's machines, or else upstream's capacity annotations on the pool; None (and a
        warning on the pool) when that is unknown."""
        spec = pool["spec"]
        wanted = spec["nodeTemplateName"]
        if wanted not in templates:
            templates[wanted] = await self._read_template(wanted)
        template = templates[wanted]
        if template is None:
            await self._warn(pool, f"node template {wanted} is gone")
            return None
        driver = (template.get("spec") or {}).get("driver")
        labels = pool_labels.machine_labels(pool["metadata"]["name"], spec)
        shape = registry.node_shape(driver, template["spec"].get("config") or {})
        if shape is not None:
            capacity: Mapping[str, str] | None = shape.capacity
            labels = {**labels, **shape.labels}
        else:
            capacity = autoscaling.template_capacity(pool["metadata"].get("annotations"))
        if capacity is None:
            await self._warn(pool, f"the capacity of a {driver} machine is unknown: annotate the "
                             f"pool {autoscaling.CAPACITY_PREFIX}cpu and memory")  # fmt: skip
            return None
        self.warned.pop(pool["metadata"]["name"], None)
        taints = (*(spec.get("nodeTaints") or ()), *(template["spec"].get("nodeTaints") or ()))
        return autoscaling.Shape("", autoscaling.resources(capacity), labels, tuple(taints))

    async def _read_template(self, name: str) -> Obj | None:
        try:
            return as_dict(await self.state.kube.get(kinds.NodeTemplate, name))
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise

    async def _set_quantity(self, pool: Obj, quantity: int) -> None:
        """`quantity`, written as this manager's on condition that the pool's spec is still the
        one the decision read (its generation): a pool changed since refuses it (422), and the
        next pass decides again. Not at its resourceVersion: the pool reconciler's status
        writes move that all the time, and the autoscaler would lose to them."""
        meta = pool["metadata"]
        change = [
            jsonpatch.test(pool, GENERATION),
            jsonpatch.add(pool, ("spec", "quantity"), quantity),
        ]
        written = await self.state.kube.patch(
            kinds.NodePool, meta["name"], change, namespace=meta["namespace"],
            patch_type=PatchType.JSON, field_manager=FIELD_MANAGER,
        )  # fmt: skip
        self.state.nodepools.put(as_dict(written))
        log.info("cluster %s: pool %s autoscaled to %d", self.cluster, meta["name"], quantity)

    async def _scale_down(
        self, seen: Seen, name: str, hostnames: list[str], found: Mapping[str, bool]
    ) -> None:
        """Mark the chosen machines, then lower the quantity by as many: the pool removes the
        marked ones first. Marked first, so that an operator stopped in between leaves a mark
        that the next pass takes off again (`_unmark_stale`), not a lower quantity that would
        remove another machine."""
        pool = seen.pools[name]
        by_host = {r["spec"]["requestedHostname"]: r for r in seen.records[name]}
        stamp = times.format_time(seen.now)
        for hostname in hostnames:
            await self._annotate(by_host[hostname], stamp)
            self.since.pop(hostname, None)
        before = int(pool["spec"].get("quantity", 1))
        after = before - len(hostnames)
        await self._set_quantity(pool, after)
        why = ", ".join(f"{h} ({'empty' if found[h] else 'its pods fit elsewhere'})"
                        for h in hostnames)  # fmt: skip
        await self._event(pool, "ScaleDown", "Normal",
                          f"quantity {before} -> {after} (min {seen.group(name).minimum}): "
                          f"removing unneeded node(s) {why}")  # fmt: skip

    async def _unmark_stale(self, pool: Obj, mine: list[Obj]) -> None:
        """A mark whose quantity was never lowered (the operator stopped in between, or the
        quantity was raised since): the machine stays, so the mark goes."""
        staying = [r for r in mine if not r["metadata"].get("deletionTimestamp")]
        if len(staying) > int(pool["spec"].get("quantity", 1)):
            return
        for record in staying:
            if marked_to_go(record):
                await self._annotate(record, None)

    async def _annotate(self, record: Obj, value: str | None) -> None:
        meta = record["metadata"]
        patch = {"metadata": {"annotations": {names.ANNOTATION_DELETE_MACHINE: value}}}
        patched = await self.state.kube.patch(
            kinds.Node, meta["name"], patch, namespace=self.cluster, patch_type=PatchType.MERGE
        )
        self.state.nodes.put(as_dict(patched))

    # -- events ---------------------------------------------------------------------------------

    async def _tell_pods(
        self,
        client: AsyncClient,
        pending: list[autoscaling.Pod],
        decided: autoscaling.ScaleUpPlan,
    ) -> None:
        """Why each pending pod did or did not make a pool grow, once per pod and answer, and
        at most MAX_POD_EVENTS a pass (the others on the next passes)."""
        chosen = decided.chosen
        helped = set(chosen.pods) if chosen is not None else set()
        told: dict[str, str] = {}
        posted = 0
        for pod in pending:
            key, uid = autoscaling.key(pod), pod["metadata"].get("uid", "")
            if key in helped and chosen is not None:
                reason = "TriggeredScaleUp"
                message = (f"pod triggered scale-up: node pool {chosen.group} "
                           f"{chosen.before}->{chosen.after}")  # fmt: skip
            elif key in decided.refused:
                reason = "NotTriggerScaleUp"
                message = f"pod didn't trigger scale-up: {decided.refused[key]}"
            else:
                if uid in self.told:
                    told[uid] = self.told[uid]
                continue
            if self.told.get(uid) == message:
                told[uid] = message
            elif posted < MAX_POD_EVENTS:
                posted += 1
                told[uid] = message
                await events.post(client, events.reference(pod, "v1", "Pod"), reason, message,
                                  "Normal", FIELD_MANAGER, self.state.clock())  # fmt: skip
        self.told = told

    async def _warn(self, pool: Obj, message: str) -> None:
        name = pool["metadata"]["name"]
        if self.warned.get(name) != message:
            self.warned[name] = message
            await self._event(pool, "CannotAutoscale", "Warning", message)

    async def _event(self, pool: Obj, reason: str, kind: str, message: str) -> None:
        involved = events.reference(pool, names.API_VERSION, names.NODE_POOL.kind)
        await events.post(self.state.kube, involved, reason, message, kind, FIELD_MANAGER,
                          self.state.clock())  # fmt: skip


def leaving(record: Obj) -> bool:
    """A machine on its way out: its record deleted, or marked by the autoscaler."""
    return bool(record["metadata"].get("deletionTimestamp")) or marked_to_go(record)
