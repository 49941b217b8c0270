"""What a downstream cluster and its nodes look like, computed from observations only.

Pure functions: the operator feeds them what it read from the downstream API (nodes, pods,
readiness, version) and writes what they return into `status`.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.core import quantity
from corral.core.conditions import Condition

ROLE_LABELS = {
    "etcd": ("node-role.kubernetes.io/etcd",),
    "controlPlane": ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"),
    "worker": ("node-role.kubernetes.io/worker",),
}
# Taints Kubernetes itself manages; a user's desired taints never replace these.
SYSTEM_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
PROVISIONING_DRIVERS = {"rke2", "k3s", "AKS", "EKS", "GKE", "svcKubernetesEngine"}
# A condition message, far below the CRD's limit: enough to say what failed and why.
MAX_MESSAGE = 4096


def node_cr_name(node_name: str) -> str:
    """The Node CR of a downstream node: stable, DNS-safe, `m-` like Rancher's machine ids."""
    return "m-" + hashlib.sha256(node_name.encode()).hexdigest()[:10]


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
            "taints": spec.get("taints") or [],
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
    ready = _condition(node, "Ready")
    registered = Condition.of("Registered", True, "Registered", "the node is in the cluster")
    return [
        Condition.of("Initialized", True, "Initialized"),
        Condition.of("Provisioned", True, "Provisioned"),
        registered,
        Condition(
            "Ready",
            ready.get("status", "Unknown"),
            ready.get("reason") or "NoReadyCondition",
            ready.get("message", ""),
        ),
        _updated(applied, pending, failure),
    ]


def _updated(applied: bool, pending: str, failure: str) -> Condition:
    if failure:
        return Condition.of("Updated", False, "ApplyFailed", failure)
    return Condition.of("Updated", applied, "Applied" if applied else "Pending", pending)


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


def cluster_conditions(
    driver: str,
    has_credential: bool,
    probe: Probe | None,
    nodes: Sequence[Mapping[str, Any]],
    failures: Mapping[str, str] | None = None,
) -> list[Condition]:
    """The seven cluster conditions of the interface, from what was observed.

    `failures` are the syncs of the last pass that failed (what -> why): `Updated` is False
    `SyncFailed` naming them, while the others went on.
    """
    failures = failures or {}
    if driver in PROVISIONING_DRIVERS:
        message = f"corral cannot provision {driver} clusters yet; the cluster is only stored"
        return [
            Condition.of("Pending", True, "ProvisioningNotAvailable", message),
            Condition.of("Provisioned", False, "ProvisioningNotAvailable", message),
            Condition("AgentDeployed", "Unknown", "NotProvisioned"),
            Condition.of("Ready", False, "NotProvisioned", message),
            updated(failures, "Stored"),
            Condition("NoDiskPressure", "Unknown", "NotProvisioned"),
            Condition("NoMemoryPressure", "Unknown", "NotProvisioned"),
        ]
    if not has_credential or probe is None:
        message = "no credential for this cluster: import it through POST /v3/clusters"
        return [
            Condition.of("Pending", True, "WaitingForCredential", message),
            Condition.of("Provisioned", False, "WaitingForCredential", message),
            Condition("AgentDeployed", "Unknown", "WaitingForCredential"),
            Condition.of("Ready", False, "WaitingForCredential", message),
            updated(failures, "Stored"),
            Condition("NoDiskPressure", "Unknown", "WaitingForCredential"),
            Condition("NoMemoryPressure", "Unknown", "WaitingForCredential"),
        ]
    origin = "Local" if driver == "local" else "Imported"
    conditions = [
        Condition.of("Pending", False, "Connected"),
        Condition.of("Provisioned", True, origin),
    ]
    if probe.credential_rejected:
        conditions.append(Condition.of("AgentDeployed", False, "CredentialRejected", probe.message))
    elif probe.reachable:
        conditions.append(Condition.of("AgentDeployed", True, "CredentialAccepted"))
    else:
        conditions.append(Condition("AgentDeployed", "Unknown", "Unreachable", probe.message))
    if probe.ready:
        conditions.append(Condition.of("Ready", True, "Ready", "the cluster's API server is ready"))
    else:
        reason = "Unreachable" if not probe.reachable else "NotReady"
        conditions.append(Condition.of("Ready", False, reason, probe.message))
    conditions.append(updated(failures))
    for pressure in ("DiskPressure", "MemoryPressure"):
        if not probe.reachable:
            conditions.append(Condition(f"No{pressure}", "Unknown", "Unreachable"))
            continue
        pressed = sorted(
            n["metadata"]["name"] for n in nodes if _condition(n, pressure).get("status") == "True"
        )
        conditions.append(
            Condition.of(
                f"No{pressure}",
                not pressed,
                f"{pressure}" if pressed else f"No{pressure}",
                f"{pressure} on: {', '.join(pressed)}" if pressed else "",
            )
        )
    return conditions


def updated(failures: Mapping[str, str], reason: str = "Applied") -> Condition:
    """The cluster's `Updated`: True `reason`, or False `SyncFailed` with every failure."""
    if not failures:
        return Condition.of("Updated", True, reason)
    message = "; ".join(f"{what}: {why}" for what, why in sorted(failures.items()))
    return Condition.of("Updated", False, "SyncFailed", message[:MAX_MESSAGE])
