"""The autoscaler's rules for node pools with bounds (docs/provisioning.md "Autoscaling"): the
cluster-autoscaler's rules (provisioning.md 4.5) on what the agent observed. Pure: the
operator's autoscaler (`corral.operator.downstream.autoscaler`) observes, this decides.

Scale up: pods the scheduler marked `Unschedulable` that no existing or upcoming node takes
are packed first-fit-decreasing onto new template nodes of each pool they fit (requests within
allocatable, node selector and required node affinity against the pool's labels, the pool's
taints tolerated), at most up to the pool's maximum; the pool that wastes least wins.

Scale down: a node of a pool is unneeded while its requests stay below a share of its
allocatable (cpu and memory both), every pod that would have to move can move, and the
simulation finds them room on the other nodes; unneeded long enough, it is removed, empty ones
in bulk, others one at a time, never below the pool's minimum.
"""

from __future__ import annotations

import datetime
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from corral.core import quantity
from corral.core.nodepools import naming

# Upstream's annotations, read with the same meaning.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
CAPACITY_PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
# What a template node takes when its capacity says nothing of pods (upstream's default).
DEFAULT_MAX_PODS = 110
MIRROR = "kubernetes.io/config.mirror"
# Taints that keep pods off a node; PreferNoSchedule only asks.
_REPELLING = ("NoSchedule", "NoExecute")

Pod = Mapping[str, Any]


@dataclass(frozen=True)
class Resources:
    """What the autoscaler counts: cpu in millicores, memory in bytes, pods."""

    cpu: int = 0
    memory: int = 0
    pods: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.pods + other.pods)

    def within(self, limit: Resources) -> bool:
        return self.cpu <= limit.cpu and self.memory <= limit.memory and self.pods <= limit.pods


def _amount(text: Any, scale: int) -> int:
    """A stored quantity in units of 1/scale, rounded up; 0 when it is not one (Kubernetes
    validated what it stored: a bad value can only be a foreign one)."""
    return _parsed(text, scale) if isinstance(text, str) else 0


# A pass parses the same few texts thousands of times (every pod's requests in every fit).
@functools.lru_cache(maxsize=4096)
def _parsed(text: str, scale: int) -> int:
    try:
        value = quantity.parse(text, saturate=True)
    except quantity.QuantityError:
        return 0
    return max(0, math.ceil(value * Decimal(scale)))


def resources(listed: Mapping[str, Any] | None) -> Resources:
    """A ResourceList (`{"cpu": "500m", "memory": "1Gi", "pods": "110"}`) as Resources."""
    listed = listed or {}
    return Resources(_amount(listed.get("cpu", "0"), 1000), _amount(listed.get("memory", "0"), 1),
                     _amount(listed.get("pods", "0"), 1))  # fmt: skip


def pod_requests(pod: Pod) -> Resources:
    """What the scheduler reserves for a pod: its containers' requests (with sidecars, init
    containers that keep running), at least each other init container's, plus its overhead."""
    spec = pod.get("spec") or {}

    def requested(container: Mapping[str, Any]) -> Resources:
        return resources((container.get("resources") or {}).get("requests"))

    inits = spec.get("initContainers") or []
    running = [*(spec.get("containers") or []),
               *(c for c in inits if c.get("restartPolicy") == "Always")]  # fmt: skip
    total = sum((requested(c) for c in running), Resources())
    for init in inits:
        if init.get("restartPolicy") != "Always":
            one = requested(init)
            total = Resources(max(total.cpu, one.cpu), max(total.memory, one.memory), 0)
    return total + resources(spec.get("overhead")) + Resources(pods=1)


@dataclass(frozen=True)
class Shape:
    """A node as the scheduler sees it; `name` is empty for a pool's template node."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()


def node_shape(node: Mapping[str, Any]) -> Shape:
    meta, spec = node["metadata"], node.get("spec") or {}
    allocatable = (node.get("status") or {}).get("allocatable")
    return Shape(meta["name"], resources(allocatable), dict(meta.get("labels") or {}),
                 tuple(spec.get("taints") or ()))  # fmt: skip


def _matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    operator, values = requirement.get("operator"), requirement.get("values") or []
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_matches(term: Mapping[str, Any], shape: Shape) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    for requirement in expressions:
        if not _matches(requirement, shape.labels.get(requirement.get("key", ""))):
            return False
    for requirement in fields:
        # Only metadata.name exists; a template node has no name yet.
        named = requirement.get("key") == "metadata.name" and shape.name
        if not _matches(requirement, shape.name if named else None):
            return False
    return True


def selects(pod: Pod, shape: Shape) -> bool:
    """Whether the pod's nodeSelector and required node affinity take this node."""
    spec = pod.get("spec") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if shape.labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))  # fmt: skip
    if required is None:
        return True
    return any(_term_matches(t, shape) for t in required.get("nodeSelectorTerms") or [])


def _tolerated(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator") == "Exists":
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def tolerates(pod: Pod, shape: Shape) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    return all(
        any(_tolerated(t, taint) for t in tolerations)
        for taint in shape.taints
        if taint.get("effect") in _REPELLING
    )


def fits(pod: Pod, shape: Shape, used: Resources | None = None) -> bool:
    """Whether the pod goes onto this node with `used` already taken there."""
    return (
        ((used or Resources()) + pod_requests(pod)).within(shape.allocatable)
        and selects(pod, shape)
        and tolerates(pod, shape)
    )


def key(pod: Pod) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def _owned_by_daemonset(pod: Pod) -> bool:
    owners = pod["metadata"].get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners)


def _finished(pod: Pod) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def unschedulable(pods: Iterable[Pod]) -> list[Pod]:
    """The scale-up candidates: pods the scheduler found no node for (`PodScheduled` False,
    reason `Unschedulable`), not being deleted and not of a DaemonSet (a new node brings its
    own)."""
    found = []
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        if _finished(pod) or _owned_by_daemonset(pod):
            continue
        if any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable"
               for c in status.get("conditions") or []):  # fmt: skip
            found.append(pod)
    return found


def _size(pod: Pod, reference: Resources) -> tuple[float, str]:
    """Bigger first for first-fit-decreasing: the pod's share of a reference node."""
    req = pod_requests(pod)
    share = req.cpu / max(reference.cpu, 1) + req.memory / max(reference.memory, 1)
    return -share, key(pod)


@dataclass
class Bin:
    """A node in a simulation, with what is already taken on it."""

    shape: Shape
    used: Resources = field(default_factory=Resources)


def first_fit(pod: Pod, bins: Sequence[Bin]) -> Bin | None:
    """The first bin the pod fits (in the order given), its room taken there; None if none."""
    for target in bins:
        if fits(pod, target.shape, target.used):
            target.used = target.used + pod_requests(pod)
            return target
    return None


def place(pods: Sequence[Pod], bins: Sequence[Bin]) -> list[Pod]:
    """Each pod on the first bin it fits; the pods that fit none."""
    return [pod for pod in pods if first_fit(pod, bins) is None]


# -- scale up -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """A pool with bounds, as the autoscaler sees it."""

    name: str
    quantity: int
    minimum: int
    maximum: int
    template: Shape | None  # None: its node's capacity is not known
    upcoming: int = 0  # machines the quantity asks for that are not Ready nodes yet


@dataclass(frozen=True)
class ScaleUp:
    group: str
    before: int
    after: int
    pods: tuple[str, ...]  # the pods it is for
    waste: float


@dataclass(frozen=True)
class ScaleUpPlan:
    chosen: ScaleUp | None
    # Pods that no pool can take, with why (upstream's NotTriggerScaleUp).
    refused: dict[str, str]


def _option(group: Group, pending: Sequence[Pod]) -> ScaleUp | None:
    template = group.template
    room = group.maximum - group.quantity
    if template is None or room <= 0:
        return None
    fitting = sorted((p for p in pending if fits(p, template)),
                     key=lambda p: _size(p, template.allocatable))  # fmt: skip
    bins: list[Bin] = []
    helped: list[str] = []
    for pod in fitting:
        if place([pod], bins):
            if len(bins) == room:
                continue  # the maximum is reached: this pod waits
            bins.append(Bin(template, pod_requests(pod)))
        helped.append(key(pod))
    if not bins:
        return None
    total = template.allocatable
    cpu = sum(b.used.cpu for b in bins) / max(total.cpu * len(bins), 1)
    memory = sum(b.used.memory for b in bins) / max(total.memory * len(bins), 1)
    waste = ((1 - cpu) + (1 - memory)) / 2
    return ScaleUp(group.name, group.quantity, group.quantity + len(bins), tuple(helped), waste)


def scale_up(groups: Sequence[Group], pods: Sequence[Pod], nodes: Sequence[Bin]) -> ScaleUpPlan:
    """Which pool grows, and by how much, for the unschedulable `pods`. `nodes` are the nodes
    that take pods now (Ready, schedulable), with what their pods take; each group's upcoming
    machines are added to them as empty template nodes, so what they will take asks for
    nothing more."""
    bins = [Bin(b.shape, b.used) for b in nodes]
    for group in groups:
        if group.template is not None:
            bins.extend(Bin(group.template) for _ in range(group.upcoming))
    reference = max((b.shape.allocatable for b in bins), key=lambda r: (r.cpu, r.memory),
                    default=Resources(1, 1, 1))  # fmt: skip
    pending = place(sorted(pods, key=lambda p: _size(p, reference)), bins)
    options = [o for g in groups if (o := _option(g, pending)) is not None]
    chosen = min(options, key=lambda o: (o.waste, o.group), default=None)
    refused: dict[str, str] = {}
    for pod in pending:
        shaped = [g for g in groups if g.template is not None and fits(pod, g.template)]
        full = [g for g in shaped if g.quantity >= g.maximum]
        if not shaped:
            refused[key(pod)] = ("it fits no node pool with autoscaling bounds (its requests, "
                                 "node selector, node affinity or tolerations)")  # fmt: skip
        elif len(full) == len(shaped):
            at = ", ".join(f"{g.name} ({g.maximum})" for g in full)
            refused[key(pod)] = f"the node pools it fits are at their maximum size: {at}"
    return ScaleUpPlan(chosen, refused)


# -- scale down ---------------------------------------------------------------------------------


def utilization(used: Resources, allocatable: Resources) -> float:
    """The larger of the cpu and memory shares of allocatable the pods request."""

    def share(have: int, total: int) -> float:
        return have / total if total > 0 else (0.0 if have == 0 else 1.0)

    return max(share(used.cpu, allocatable.cpu), share(used.memory, allocatable.memory))


def must_move(pod: Pod) -> bool:
    """Whether a pod on a removed node has to go elsewhere: DaemonSet and static pods go
    with their node, finished pods are done."""
    mirror = MIRROR in (pod["metadata"].get("annotations") or {})
    return not (mirror or _finished(pod) or _owned_by_daemonset(pod))


def blocker(pod: Pod) -> str | None:
    """Why the pod cannot move to another node, as upstream judges it; None when it can."""
    meta = pod["metadata"]
    safe = (meta.get("annotations") or {}).get(SAFE_TO_EVICT)
    if safe == "true":
        return None
    if safe == "false":
        return f"pod {key(pod)} is annotated {SAFE_TO_EVICT}: false"
    if not any(o.get("controller") for o in meta.get("ownerReferences") or []):
        return f"pod {key(pod)} has no controller to recreate it"
    if any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or []):
        return f"pod {key(pod)} has local storage (emptyDir)"
    if meta.get("namespace") == "kube-system":
        return f"pod {key(pod)} is a kube-system pod"
    return None


def scale_down_disabled(node: Mapping[str, Any]) -> bool:
    return (node["metadata"].get("annotations") or {}).get(SCALE_DOWN_DISABLED) == "true"


@dataclass(frozen=True)
class Candidate:
    node: str
    group: str


def unneeded(
    candidates: Sequence[Candidate],
    nodes: Mapping[str, Shape],
    pods_on: Mapping[str, Sequence[Pod]],
    threshold: float,
    room: Mapping[str, int],
    closed: Iterable[str] = (),
) -> dict[str, bool]:
    """The candidates that could all go at once, each with whether it is empty (nothing to
    move). `nodes` are every node of the cluster by name, `pods_on` their pods; `room` is how
    many machines each group may lose (quantity minus minimum); `closed` nodes take no pods
    (not Ready, cordoned, going). A node goes in the simulation when its requests are below
    `threshold` of its allocatable and every pod it must move can move and fits elsewhere;
    its pods then take their room on the nodes they moved to."""
    on = {name: list(pods_on.get(name, ())) for name in nodes}
    used = {name: sum((pod_requests(p) for p in on[name]), Resources()) for name in nodes}
    left = dict(room)
    gone: set[str] = set(closed)
    found: dict[str, bool] = {}

    # Least used first; among equals the natural-highest name first, as a pool scales down.
    ordered_candidates = sorted(
        (c for c in candidates if c.node in nodes),
        key=lambda c: naming.natural_key(c.node),
        reverse=True,
    )
    ordered_candidates.sort(key=lambda c: utilization(used[c.node], nodes[c.node].allocatable))
    for candidate in ordered_candidates:
        name = candidate.node
        if left.get(candidate.group, 0) <= 0:
            continue
        if utilization(used[name], nodes[name].allocatable) >= threshold:
            continue
        moving = [p for p in on[name] if must_move(p)]
        if any(blocker(p) is not None for p in moving):
            continue
        targets = [Bin(nodes[n], used[n]) for n in sorted(nodes) if n != name and n not in gone]
        reference = nodes[name].allocatable
        moves = [
            (p, first_fit(p, targets)) for p in sorted(moving, key=lambda p: _size(p, reference))
        ]
        if any(target is None for _, target in moves):
            continue
        # Moved in the simulation: where each pod went takes it from now on.
        for pod, target in moves:
            assert target is not None
            used[target.shape.name] = target.used
            on[target.shape.name].append(pod)
        gone.add(name)
        left[candidate.group] -= 1
        found[name] = not moving
    return found


def track(
    since: Mapping[str, datetime.datetime], now_unneeded: Iterable[str], now: datetime.datetime
) -> dict[str, datetime.datetime]:
    """When each unneeded node became unneeded: kept while it stays so, forgotten otherwise."""
    return {name: since.get(name, now) for name in now_unneeded}


def removals(
    found: Mapping[str, bool],
    since: Mapping[str, datetime.datetime],
    now: datetime.datetime,
    after: datetime.timedelta,
    bulk: int,
    draining: bool,
) -> list[str]:
    """The unneeded nodes to remove now: those unneeded for `after`, empty ones up to `bulk`,
    and one that is not empty unless one is draining already. Natural-highest names first."""
    due = [n for n in found if now - since.get(n, now) >= after]
    due.sort(key=naming.natural_key, reverse=True)
    empty = [n for n in due if found[n]][: max(bulk, 0)]
    busy = [] if draining else [n for n in due if not found[n]][:1]
    return [*empty, *busy]


def template_capacity(annotations: Mapping[str, str] | None) -> dict[str, str] | None:
    """A pool's node capacity from upstream's `capacity.cluster-autoscaler.kubernetes.io/*`
    annotations (cpu and memory needed; maxPods defaults to 110); None without them."""
    annotations = annotations or {}
    cpu, memory = (annotations.get(CAPACITY_PREFIX + k) for k in ("cpu", "memory"))
    if not cpu or not memory:
        return None
    pods = annotations.get(CAPACITY_PREFIX + "maxPods") or str(DEFAULT_MAX_PODS)
    return {"cpu": cpu, "memory": memory, "pods": pods}
