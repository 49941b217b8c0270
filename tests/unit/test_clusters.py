"""Pure cluster and node logic: kubeconfig parsing, status sums, conditions, taints, drain."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
import yaml

from corral.core import conditions, quantity
from corral.core.api import drivers, names
from corral.core.clusters import importing, observe, state
from corral.core.conditions import Condition, merge
from corral.operator.downstream.drain import DrainRefused, evictable


def b64(config: object) -> str:
    return base64.b64encode(yaml.safe_dump(config).encode()).decode()


def config(cluster: Any, user: Any, **extra: Any) -> dict[str, Any]:
    """A one-context kubeconfig; `extra` replaces or adds top-level keys."""
    return {
        "kind": "Config",
        "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        **extra,
    }


def test_a_kubeconfig_with_embedded_credentials_parses() -> None:
    ca = base64.b64encode(b"CA").decode()
    parsed = importing.parse_kubeconfig(
        b64(config({"server": "https://h:6443", "certificate-authority-data": ca}, {"token": "t"}))
    )
    assert (parsed.server, parsed.ca_cert, parsed.token) == ("https://h:6443", b"CA", "t")


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        ("", "base64-encoded"),
        ("!!!", "not valid base64"),
        (base64.b64encode(b"\xff").decode(), "not valid base64"),
        (b64([1, 2]), "not a kubeconfig"),
        (b64(config({"server": "http://h"}, {"token": "t"})), "https://"),
        (
            b64(config({"server": "https://h", "insecure-skip-tls-verify": True}, {"token": "t"})),
            "insecure",
        ),
        (
            b64(config({"server": "https://h", "certificate-authority": "/ca"}, {"token": "t"})),
            "embed the CA",
        ),
        (b64(config({"server": "https://h"}, {"exec": {"command": "x"}})), "embed credentials"),
        (b64(config({"server": "https://h"}, {})), "neither a token"),
        (b64({"kind": "Config", "contexts": []}), "no current-context"),
    ],
)
def test_unusable_kubeconfigs_are_refused_with_a_reason(encoded: str, message: str) -> None:
    with pytest.raises(importing.ImportFailed, match=message):
        importing.parse_kubeconfig(encoded)


def node(name: str, ready: str = "True", **extra: object) -> dict:
    conditions_ = [{"type": "Ready", "status": ready, "reason": "KubeletReady"}]
    conditions_ += [{"type": t, "status": "True"} for t in extra.pop("pressure", [])]  # type: ignore[attr-defined]
    return {
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": "true"}},
        "spec": {"providerID": f"aws:///{name}"},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi"},
            "allocatable": {"cpu": "3800m", "memory": "15Gi"},
            "conditions": conditions_,
        },
        **extra,
    }


def test_quantities_sum_and_print_like_kubernetes() -> None:
    assert quantity.add([{"cpu": "500m", "memory": "256Mi"}, {"cpu": "1.5", "memory": "1Gi"}]) == {
        "cpu": "2",
        "memory": "1280Mi",
    }
    assert quantity.format_quantity(quantity.parse("1500m"), "cpu") == "1500m"
    assert quantity.format_quantity(quantity.parse("1000"), "memory") == "1000"
    with pytest.raises(quantity.QuantityError):
        quantity.parse("lots")


def test_pod_totals_skip_finished_pods_and_count_pods() -> None:
    def pod(node_name: str, phase: str, cpu: str) -> dict:
        return {
            "spec": {
                "nodeName": node_name,
                "containers": [{"resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}],
            },
            "status": {"phase": phase},
        }

    totals = observe.pod_totals(
        [
            pod("a", "Running", "250m"),
            pod("a", "Running", "250m"),
            pod("a", "Succeeded", "1"),
            pod("b", "Pending", "1"),
        ]
    )
    assert totals["a"].requested == {"cpu": "500m", "pods": "2"}
    assert totals["a"].limits == {"cpu": "500m"}
    assert totals["b"].requested == {"cpu": "1", "pods": "1"}


def test_cluster_status_sums_nodes_and_names_the_provider() -> None:
    probe = observe.Probe(True, True, version={"gitVersion": "v1.36.3", "major": "1"})
    status = observe.cluster_status(
        "imported", "https://h", b"CA", [node("a"), node("b")], {}, probe
    )
    assert status["nodeCount"] == 2
    assert status["capacity"] == {"cpu": "8", "memory": "32Gi"}
    assert status["allocatable"] == {"cpu": "7600m", "memory": "30Gi"}
    assert status["provider"] == "aws"
    assert status["version"] == {"gitVersion": "v1.36.3", "major": "1"}
    assert base64.b64decode(status["caCert"]) == b"CA"


def by_type(found: list[Condition]) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in found}


def test_cluster_conditions_for_every_situation() -> None:
    healthy = by_type(
        observe.cluster_conditions("imported", True, observe.Probe(True, True), [node("a")])
    )
    assert healthy == {
        "Pending": ("False", "Connected"),
        "Provisioned": ("True", "Imported"),
        "AgentDeployed": ("True", "CredentialAccepted"),
        "Ready": ("True", "Ready"),
        "Updated": ("True", "Applied"),
        "NoDiskPressure": ("True", "NoDiskPressure"),
        "NoMemoryPressure": ("True", "NoMemoryPressure"),
    }
    down = by_type(
        observe.cluster_conditions("imported", True, observe.Probe(False, False, "x"), [])
    )
    assert down["Ready"] == ("False", "Unreachable")
    assert down["NoMemoryPressure"][0] == "Unknown"
    refused = observe.Probe(True, False, "401", credential_rejected=True)
    assert by_type(observe.cluster_conditions("imported", True, refused, []))["AgentDeployed"] == (
        "False",
        "CredentialRejected",
    )
    pressed = by_type(
        observe.cluster_conditions(
            "imported", True, observe.Probe(True, True), [node("a", pressure=["MemoryPressure"])]
        )
    )
    assert pressed["NoMemoryPressure"] == ("False", "MemoryPressure")
    assert by_type(observe.cluster_conditions("imported", False, None, []))["Pending"] == (
        "True",
        "WaitingForCredential",
    )


@pytest.mark.parametrize("driver", sorted(drivers.PROVISIONED - drivers.HOSTED))
def test_a_stored_cluster_corral_cannot_provision_tells_its_owner_what_to_do(driver: str) -> None:
    """Stored around the API (kubectl, an older version): it never comes, and says so."""
    [provisioned] = [
        c for c in observe.cluster_conditions(driver, False, None, []) if c.type == "Provisioned"
    ]
    assert (provisioned.status, provisioned.reason) == ("False", "ProvisioningNotAvailable")
    assert "will never be provisioned" in provisioned.message
    assert "delete it" in provisioned.message
    assert "importedConfig.kubeConfig" in provisioned.message
    assert "rke2 or k3s" in provisioned.message


def test_a_hosted_cluster_is_pending_with_the_provisioners_word_until_corral_is_in() -> None:
    waiting = {"step": "WaitingForControlPlane", "message": "waiting for etcd: pod etcd-0 …"}
    pending = observe.cluster_conditions("rke2", False, None, [], provisioning=waiting)
    assert by_type(pending)["Pending"] == ("True", "Provisioning")
    assert by_type(pending)["Provisioned"] == ("False", "Provisioning")
    assert {c.message for c in pending if c.type == "Pending"} == {waiting["message"]}
    failed = {"step": "Failed", "message": "Kubernetes version v1.9.9 is not in the catalog"}
    [message] = [
        c.message
        for c in observe.cluster_conditions("k3s", False, None, [], provisioning=failed)
        if c.type == "Pending"
    ]
    assert message.startswith("provisioning failed, and is tried again: Kubernetes version")
    up = by_type(observe.cluster_conditions("k3s", True, observe.Probe(True, True), []))
    assert up["Pending"] == ("False", "Connected")
    assert up["Provisioned"] == ("True", "Provisioned")
    assert up["Ready"] == ("True", "Ready")


def test_merge_keeps_transition_times_when_status_does_not_change() -> None:
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    t1 = t0 + datetime.timedelta(minutes=5)
    first = conditions.merge([], [Condition.of("Ready", True, "Ready")], t0, 1)
    same = conditions.merge(first, [Condition.of("Ready", True, "Ready")], t1, 1)
    assert same == first
    changed = conditions.merge(same, [Condition.of("Ready", False, "Unreachable", "down")], t1, 2)
    assert changed[0]["lastTransitionTime"] == "2026-01-01T00:05:00Z"
    assert changed[0]["observedGeneration"] == 2
    kept = conditions.merge([*changed, {"type": "Drained", "status": "True"}], [], t1)
    assert [c["type"] for c in kept] == ["Drained", "Ready"]


def test_desired_taints_keep_the_ones_kubernetes_owns() -> None:
    current = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "old", "value": "x", "effect": "NoSchedule"},
    ]
    desired = [{"key": "new", "value": "", "effect": "PreferNoSchedule"}]
    assert observe.desired_taints(current, desired) == [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "new", "effect": "PreferNoSchedule"},
    ]


def test_node_records_are_stable_and_roles_come_from_labels() -> None:
    assert names.node_cr_name("worker-1") == names.node_cr_name("worker-1")
    assert names.node_cr_name("worker-1").startswith("m-")
    spec = observe.node_spec(node("a"))
    assert spec == {"requestedHostname": "a", "etcd": False, "controlPlane": False, "worker": True}


def pod(name: str, **meta: object) -> dict:
    return {
        "metadata": {"name": name, "namespace": "ns", **meta},
        "spec": {},
        "status": {"phase": "Running"},
    }


def test_drain_chooses_pods_as_kubectl_does() -> None:
    managed = pod("web", ownerReferences=[{"kind": "ReplicaSet", "controller": True}])
    daemon = pod("agent", ownerReferences=[{"kind": "DaemonSet", "controller": True}])
    mirror = pod("static", annotations={"kubernetes.io/config.mirror": "x"})
    bare = pod("bare")
    local = {**managed, "spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}

    assert evictable([managed, daemon, mirror], {"ignoreDaemonSets": True}) == [managed]
    with pytest.raises(DrainRefused, match="DaemonSet"):
        evictable([daemon], {})
    with pytest.raises(DrainRefused, match="no controller"):
        evictable([bare], {})
    assert evictable([bare], {"force": True}) == [bare]
    with pytest.raises(DrainRefused, match="emptyDir"):
        evictable([local], {})
    assert evictable([local], {"deleteLocalData": True}) == [local]


def test_a_cluster_reached_through_its_agent_says_whether_the_agent_is_connected() -> None:
    connected = observe.Agent(connected=True, version="0.1.0", image="localhost/corral:0.1.0")
    conditions = observe.cluster_conditions(
        "imported", True, observe.Probe(True, True), [node("a")], agent=connected
    )
    deployed = next(c for c in conditions if c.type == "AgentDeployed")
    assert (deployed.status, deployed.reason, deployed.message) == (
        "True",
        "AgentConnected",
        "agent 0.1.0",
    )
    assert by_type(conditions)["Ready"] == ("True", "Ready")
    # Without its tunnel there is no probe: the agent's absence is the reason, not an import.
    lost = by_type(
        observe.cluster_conditions("imported", True, None, [], agent=observe.Agent(False))
    )
    assert lost["AgentDeployed"] == ("False", "AgentDisconnected")
    assert lost["Ready"] == ("False", "AgentDisconnected")
    assert lost["Pending"] == ("False", "Connected")
    observed = observe.cluster_conditions("imported", True, None, [], agent=observe.Agent(False))
    merged = merge([], observed, datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC))
    assert state.state({"metadata": {}, "status": {"conditions": merged}})[0] == "unavailable"
