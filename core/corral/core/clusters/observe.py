"""What a downstream cluster and its nodes look like, computed from observations only.

Pure functions: the operator feeds them what it read from the downstream API (nodes, pods,
readiness, version) and writes what they return into `status`.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.core import quantity
from corral.core.api import condition_types as ct
from corral.core.api import drivers
from corral.core.conditions import Condition
from corral.core.provisioning import restore

ROLE_LABELS = {
    "etcd": ("node-role.kubernetes.io/etcd",),
    "controlPlane": ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"),
    "worker": ("node-role.kubernetes.io/worker",),
}
# Taints Kubernetes itself manages; a user's desired taints never replace these.
SYSTEM_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
# The provisioner's steps that roll a provisioned cluster's control plane; `Updated` names them.
ROLLING_STEPS = (ct.REASON_ROTATING_CERTIFICATES, ct.REASON_UPGRADING)
# A condition message, far below the CRD's limit: enough to say what failed and why.
MAX_MESSAGE = 4096
# Kubernetes' own conditions of a downstream node that corral reads.
KUBE_NODE_READY = "Ready"
# Each pressure condition of a cluster: the nodes' condition it sums up, and its reasons when
# some node reports it and when none does.
_PRESSURES = (
    (ct.NO_DISK_PRESSURE, "DiskPressure", ct.REASON_DISK_PRESSURE, ct.REASON_NO_DISK_PRESSURE),
    (
        ct.NO_MEMORY_PRESSURE,
        "MemoryPressure",
        ct.REASON_MEMORY_PRESSURE,
        ct.REASON_NO_MEMORY_PRESSURE,
    ),
)


# -- pods -------------------------------------------------------------------------------------


@dataclass
class PodTotals:
    requested: dict[str, str] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)


def pod_totals(pods: Iterable[Mapping[str, Any]]) -> dict[str, PodTotals]:
    """Requests and limits of the running (not finished) pods, summed per node."""
    requested: dict[str, list[Mapping[str, str]]] = {}
    limits: dict[str, list[Mapping[str, str]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        requested.setdefault(node, []).append({"pods": "1"})
        limits.setdefault(node, [])
        for container in (pod.get("spec") or {}).get("containers") or []:
            resources = container.get("resources") or {}
            requested[node].append(resources.get("requests") or {})
            limits[node].append(resources.get("limits") or {})
    return {
        node: PodTotals(quantity.add(requested[node]), quantity.add(limits.get(node, [])))
        for node in requested
    }


# -- nodes ------------------------------------------------------------------------------------


NODE_METADATA = ("name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                 "labels", "annotations")  # fmt: skip
NODE_STATUS = ("addresses", "capacity", "allocatable")
NODE_CONDITION = ("type", "status", "reason", "message")


def observed_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent keeps of a downstream node: what the mirror, the cluster's status, the
    pools and the autoscaler read (metadata but managed fields, the whole spec, addresses,
    capacity, allocatable, and each condition's type, status, reason and message). A kubelet's
    heartbeat moves only the times of its conditions, so it changes nothing kept; nor do the
    images and volumes a node reports."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    kept_status = {k: status[k] for k in NODE_STATUS if k in status}
    if status.get("conditions"):
        kept_status["conditions"] = [
            {k: c[k] for k in NODE_CONDITION if k in c} for c in status["conditions"]
        ]
    return {
        "metadata": {k: meta[k] for k in NODE_METADATA if k in meta},
        "spec": node.get("spec") or {},
        "status": kept_status,
    }


def node_spec(node: Mapping[str, Any]) -> dict[str, Any]:
    """The spec a new Node CR starts with, taken from the downstream node."""
    labels = node["metadata"].get("labels") or {}
    spec: dict[str, Any] = {"requestedHostname": node["metadata"]["name"]}
    for role, keys in ROLE_LABELS.items():
        spec[role] = any(key in labels for key in keys)
    return spec


def node_status(node: Mapping[str, Any], totals: PodTotals | None) -> dict[str, Any]:
    """The Node CR's status fields other than conditions."""
    status, spec, meta = node.get("status") or {}, node.get("spec") or {}, node["metadata"]
    return {
        "nodeName": meta["name"],
        "requested": (totals.requested if totals else {}),
        "limits": (totals.limits if totals else {}),
        "internalNodeStatus": {
            "addresses": status.get("addresses") or [],
            "capacity": status.get("capacity") or {},
            "allocatable": status.get("allocatable") or {},
            "unschedulable": bool(spec.get("unschedulable", False)),
            # The fields the Node CR declares: an apply naming others (`timeAdded`) is refused.
            "taints": [
                {k: t[k] for k in ("key", "value", "effect") if k in t}
                for t in spec.get("taints") or []
            ],
        },
        "nodeLabels": meta.get("labels") or {},
        "nodeAnnotations": meta.get("annotations") or {},
    }


def node_conditions(
    node: Mapping[str, Any], applied: bool, pending: str, failure: str = ""
) -> list[Condition]:
    """Initialized, Provisioned, Registered, Ready and Updated of a mirrored node.

    `applied` says whether the node matches what its Node CR asks for; `pending` says what
    does not, when it does not; `failure` why applying it failed, when it did.
    """
    ready = _condition(node, KUBE_NODE_READY)
    registered = Condition.of(
        ct.REGISTERED, True, ct.REASON_REGISTERED, "the node is in the cluster"
    )
    return [
        Condition.of(ct.INITIALIZED, True, ct.REASON_INITIALIZED),
        Condition.of(ct.PROVISIONED, True, ct.REASON_PROVISIONED),
        registered,
        Condition(
            ct.READY,
            ready.get("status", "Unknown"),
            ready.get("reason") or ct.REASON_NO_READY_CONDITION,
            ready.get("message", ""),
        ),
        _updated(applied, pending, failure),
    ]


def _updated(applied: bool, pending: str, failure: str) -> Condition:
    if failure:
        return Condition.of(ct.UPDATED, False, ct.REASON_APPLY_FAILED, failure)
    return Condition.of(
        ct.UPDATED, applied, ct.REASON_APPLIED if applied else ct.REASON_PENDING, pending
    )


def desired_taints(
    current: Sequence[Mapping[str, Any]], desired: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The taints a node should have: Kubernetes' own, plus exactly the desired ones.

    Unique by key and effect, as Kubernetes requires: a desired taint under a Kubernetes
    prefix that the node already has is not added a second time.
    """
    kept = [dict(t) for t in current if str(t.get("key", "")).startswith(SYSTEM_TAINT_PREFIXES)]
    taken = {(t.get("key"), t.get("effect")) for t in kept}
    wanted = [
        {k: v for k, v in t.items() if k in ("key", "value", "effect") and v not in (None, "")}
        for t in desired
        if (t.get("key"), t.get("effect")) not in taken
    ]
    return kept + wanted


def _condition(node: Mapping[str, Any], type: str) -> Mapping[str, Any]:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == type:
            return dict(condition)
    return {}


# -- clusters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One look at a cluster: did it answer, and what did it say."""

    reachable: bool
    ready: bool
    message: str = ""
    credential_rejected: bool = False
    version: Mapping[str, Any] | None = None


def provider(nodes: Iterable[Mapping[str, Any]]) -> str:
    """The cloud provider most nodes report in their providerID (`aws:///…` -> `aws`)."""
    kinds = Counter(
        pid.split(":", 1)[0]
        for n in nodes
        if (pid := (n.get("spec") or {}).get("providerID", "")) and ":" in pid
    )
    return kinds.most_common(1)[0][0] if kinds else ""


def cluster_status(
    driver: str,
    server: str,
    ca_cert: bytes | None,
    nodes: Sequence[Mapping[str, Any]],
    totals: Mapping[str, PodTotals],
    probe: Probe,
) -> dict[str, Any]:
    """The Cluster's status fields other than conditions, from a successful look."""
    status: dict[str, Any] = {
        "driver": driver,
        "provider": provider(nodes),
        "apiEndpoint": server,
        "caCert": base64.b64encode(ca_cert).decode() if ca_cert else "",
        "nodeCount": len(nodes),
        "capacity": quantity.add((n.get("status") or {}).get("capacity") or {} for n in nodes),
        "allocatable": quantity.add(
            (n.get("status") or {}).get("allocatable") or {} for n in nodes
        ),
        "requested": quantity.add(t.requested for t in totals.values()),
        "limits": quantity.add(t.limits for t in totals.values()),
    }
    if probe.version:
        status["version"] = {
            k: str(probe.version[k])
            for k in ("gitVersion", "major", "minor", "platform")
            if k in probe.version
        }
    return status


@dataclass(frozen=True)
class Agent:
    """A cluster reached through its agent's tunnel: whether a tunnel is held (its Lease is
    fresh), and what the agent said of itself."""

    connected: bool
    version: str = ""
    image: str = ""


def cluster_conditions(
    driver: str,
    has_credential: bool,
    probe: Probe | None,
    nodes: Sequence[Mapping[str, Any]],
    failures: Mapping[str, str] | None = None,
    duplicate_of: str | None = None,
    provisioning: Mapping[str, Any] | None = None,
    agent: Agent | None = None,
) -> list[Condition]:
    """The seven cluster conditions of the interface, from what was observed.

    `failures` are the syncs of the last pass that failed (what -> why): `Updated` is False
    `SyncFailed` naming them, while the others went on; `duplicate_of` is the Cluster that
    has this cluster's claim, which makes `Updated` False `DuplicateImport`. `provisioning`
    is the provisioner's `status.provisioning` of a hosted cluster: until corral has its
    credential, its step and message are the cluster's `Pending`.
    """
    failures = failures or {}
    if driver in drivers.HOSTED and not has_credential:
        message = (provisioning or {}).get("message") or "waiting for the provisioner"
        step = (provisioning or {}).get("step")
        if step == "Failed":
            message = f"provisioning failed, and is tried again: {message}"
        return pending(ct.REASON_PROVISIONING, ct.REASON_NOT_PROVISIONED, message, failures)
    if driver in drivers.PROVISIONED - drivers.HOSTED:
        return pending(
            ct.REASON_PROVISIONING_NOT_AVAILABLE,
            ct.REASON_NOT_PROVISIONED,
            drivers.never_provisioned(driver),
            failures,
        )
    if has_credential and agent is not None and not agent.connected:
        return disconnected(failures)
    if not has_credential or probe is None:
        message = (
            "waiting for an import: corral has no credential for this cluster; apply its "
            "registration's command (clusterregistrationtokens) in the cluster, or give its "
            "kubeconfig as importedConfig.kubeConfig in a PUT of the cluster"
        )
        return pending(
            ct.REASON_WAITING_FOR_CREDENTIAL, ct.REASON_WAITING_FOR_CREDENTIAL, message, failures
        )
    origin = {
        drivers.LOCAL: ct.REASON_LOCAL,
        **dict.fromkeys(drivers.HOSTED, ct.REASON_PROVISIONED),
    }.get(driver, ct.REASON_IMPORTED)
    conditions = [
        Condition.of(ct.PENDING, False, ct.REASON_CONNECTED),
        Condition.of(ct.PROVISIONED, True, origin),
    ]
    if agent is not None and not probe.credential_rejected:
        message = f"agent {agent.version}" if agent.version else "agent connected"
        conditions.append(Condition.of(ct.AGENT_DEPLOYED, True, ct.REASON_AGENT_CONNECTED, message))
    elif probe.credential_rejected:
        conditions.append(
            Condition.of(ct.AGENT_DEPLOYED, False, ct.REASON_CREDENTIAL_REJECTED, probe.message)
        )
    elif probe.reachable:
        conditions.append(Condition.of(ct.AGENT_DEPLOYED, True, ct.REASON_CREDENTIAL_ACCEPTED))
    else:
        conditions.append(
            Condition(ct.AGENT_DEPLOYED, "Unknown", ct.REASON_UNREACHABLE, probe.message)
        )
    if probe.ready:
        conditions.append(
            Condition.of(ct.READY, True, ct.REASON_READY, "the cluster's API server is ready")
        )
    else:
        reason = ct.REASON_UNREACHABLE if not probe.reachable else ct.REASON_NOT_READY
        conditions.append(Condition.of(ct.READY, False, reason, probe.message))
    restoring = restore.record(provisioning)
    if duplicate_of:
        conditions.append(duplicate(duplicate_of, failures))
    elif restoring.restore is not None and restoring.restore.running:
        # A restore replaces the cluster's data: it is not up to date until it is done.
        conditions.append(
            Condition.of(ct.UPDATED, False, ct.REASON_RESTORING, restore.message(restoring))
        )
    elif (step := (provisioning or {}).get("step")) in ROLLING_STEPS:
        # A rotation or a version change: the control plane rolls, with its progress shown.
        conditions.append(
            Condition.of(
                ct.UPDATED, False, str(step), str((provisioning or {}).get("message") or "")
            )
        )
    else:
        conditions.append(updated(failures))
    for type, pressure, pressed_reason, fine_reason in _PRESSURES:
        if not probe.reachable:
            conditions.append(Condition(type, "Unknown", ct.REASON_UNREACHABLE))
            continue
        pressed = sorted(
            n["metadata"]["name"] for n in nodes if _condition(n, pressure).get("status") == "True"
        )
        conditions.append(
            Condition.of(
                type,
                not pressed,
                pressed_reason if pressed else fine_reason,
                f"{pressure} on: {', '.join(pressed)}" if pressed else "",
            )
        )
    return conditions


def disconnected(failures: Mapping[str, str]) -> list[Condition]:
    """The conditions of a cluster whose agent has no tunnel: imported, but nothing of it can
    be looked at until the agent dials again."""
    message = "the cluster's agent is not connected to corral"
    return [
        Condition.of(ct.PENDING, False, ct.REASON_CONNECTED),
        Condition.of(ct.PROVISIONED, True, ct.REASON_IMPORTED),
        Condition.of(ct.AGENT_DEPLOYED, False, ct.REASON_AGENT_DISCONNECTED, message),
        Condition.of(ct.READY, False, ct.REASON_AGENT_DISCONNECTED, message),
        updated(failures),
        Condition(ct.NO_DISK_PRESSURE, "Unknown", ct.REASON_AGENT_DISCONNECTED),
        Condition(ct.NO_MEMORY_PRESSURE, "Unknown", ct.REASON_AGENT_DISCONNECTED),
    ]


def pending(
    why: str, unobserved: str, message: str, failures: Mapping[str, str]
) -> list[Condition]:
    """The conditions of a cluster corral cannot look at yet: Pending for `why`, everything
    that needs a look Unknown (or False) for `unobserved`."""
    return [
        Condition.of(ct.PENDING, True, why, message),
        Condition.of(ct.PROVISIONED, False, why, message),
        Condition(ct.AGENT_DEPLOYED, "Unknown", unobserved),
        Condition.of(ct.READY, False, unobserved, message),
        updated(failures, ct.REASON_STORED),
        Condition(ct.NO_DISK_PRESSURE, "Unknown", unobserved),
        Condition(ct.NO_MEMORY_PRESSURE, "Unknown", unobserved),
    ]


def duplicate(other: str, failures: Mapping[str, str]) -> Condition:
    """The cluster's `Updated` when another Cluster has claimed the same cluster."""
    failed = "; ".join(f"{what}: {why}" for what, why in sorted(failures.items()))
    message = f"this cluster is already imported as {other}" + (f"; {failed}" if failed else "")
    return Condition.of(ct.UPDATED, False, ct.REASON_DUPLICATE_IMPORT, message[:MAX_MESSAGE])


def updated(failures: Mapping[str, str], reason: str = ct.REASON_APPLIED) -> Condition:
    """The cluster's `Updated`: True `reason`, or False `SyncFailed` with every failure."""
    if not failures:
        return Condition.of(ct.UPDATED, True, reason)
    message = "; ".join(f"{what}: {why}" for what, why in sorted(failures.items()))
    return Condition.of(ct.UPDATED, False, ct.REASON_SYNC_FAILED, message[:MAX_MESSAGE])
