"""The objects of a hosted control plane (manifests) and how its progress is read (progress)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from corral.core.api import names
from corral.core.provisioning import catalog, manifests, progress
from corral.core.provisioning import pki as cp

IMAGE = "localhost/corral-controlplane:v1.36.3-abc"
ADDRESSES = cp.Addresses(namespace="c-m-abc", apiserver_ip="10.0.0.40", etcd_ip="10.0.0.41")


def release(kwok: bool = True) -> catalog.Release:
    text = catalog.document(
        {
            "v1.36.3": catalog.binaries(
                {name: IMAGE for name in (*catalog.REQUIRED, catalog.KWOK)},
                ("/usr/local/bin/corral-kwok",) if kwok else None,
            )
        }
    )
    return catalog.parse(text).release("v1.36.3")


def plan(**overrides: Any) -> manifests.Plan:
    fields: dict[str, Any] = {
        "cluster": "c-m-abc",
        "flavour": "rke2",
        "release": release(),
        "addresses": ADDRESSES,
        "pki_generation": 1,
        "storage_class": "corral-hostpath",
    }
    return manifests.Plan(**(fields | overrides))


def containers(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = deployment["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}


def flags(container: dict[str, Any]) -> dict[str, str]:
    return dict(arg.removeprefix("--").partition("=")[::2] for arg in container["command"][1:])


def test_the_services_select_their_component_in_the_clusters_namespace() -> None:
    etcd, apiserver = manifests.services("c-m-abc")
    assert (etcd["metadata"]["name"], etcd["spec"]["ports"][0]["port"]) == ("etcd", 2379)
    assert (apiserver["metadata"]["name"], apiserver["spec"]["ports"][0]["port"]) == (
        "kube-apiserver",
        6443,
    )
    for service in (etcd, apiserver):
        assert service["metadata"]["namespace"] == "c-m-abc"
        assert service["spec"]["selector"][names.LABEL_CLUSTER] == "c-m-abc"


def test_etcd_is_one_member_on_its_claim_serving_mutual_tls_at_its_service() -> None:
    statefulset = manifests.etcd(plan())
    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    given = flags(container)
    assert container["command"][0] == "/usr/local/bin/etcd"
    assert container["image"] == IMAGE
    assert given["advertise-client-urls"] == "https://10.0.0.41:2379"
    assert given["data-dir"] == "/var/lib/etcd/data-0"
    assert "client-cert-auth" in given
    assert given["initial-cluster-token"] == "c-m-abc"
    [claim] = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "corral-hostpath"
    assert statefulset["spec"]["replicas"] == 1
    default = manifests.etcd(plan(storage_class=""))["spec"]["volumeClaimTemplates"][0]
    assert "storageClassName" not in default["spec"]


def test_the_apiserver_dials_etcd_at_its_service_and_the_components_dial_loopback() -> None:
    deployment = manifests.control_plane(plan())
    found = containers(deployment)
    assert set(found) == {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
    apiserver = flags(found["kube-apiserver"])
    assert apiserver["etcd-servers"] == "https://10.0.0.41:2379"
    assert apiserver["service-cluster-ip-range"] == "10.43.0.0/16"
    assert apiserver["advertise-address"] == "$(POD_IP)"
    assert flags(found["kube-controller-manager"])["leader-elect"] == "true"
    assert flags(found["kwok"])["manage-nodes-with-annotation-selector"] == (
        f"{names.KWOK_NODE_ANNOTATION}={names.KWOK_NODE_VALUE}"
    )
    spec = deployment["spec"]
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert spec["template"]["spec"]["automountServiceAccountToken"] is False
    mounted = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
    assert mounted["apiserver"]["secret"]["secretName"] == cp.APISERVER


def test_the_components_start_once_the_apiserver_is_live_and_it_is_stopped_last() -> None:
    spec = manifests.control_plane(plan())["spec"]["template"]["spec"]
    [apiserver] = spec["initContainers"]
    assert apiserver["name"] == "kube-apiserver"
    # A sidecar: kept running, started before the containers, which wait for its startup probe.
    assert apiserver["restartPolicy"] == "Always"
    assert apiserver["startupProbe"]["httpGet"]["path"] == "/livez"
    assert apiserver["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert [c["name"] for c in spec["containers"]] == [
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    ]


def test_without_kwok_in_the_release_no_nodes_are_simulated() -> None:
    found = containers(manifests.control_plane(plan(release=release(kwok=False))))
    assert "kwok" not in found


@pytest.mark.parametrize("flavour", ["rke2", "k3s"])
def test_only_rke2_hardens_the_apiserver(flavour: str) -> None:
    apiserver = flags(containers(manifests.control_plane(plan(flavour=flavour)))["kube-apiserver"])
    files = manifests.configuration(plan(flavour=flavour))["data"]
    if flavour == "rke2":
        assert apiserver["profiling"] == "false"
        authentication = json.loads(files["authentication.json"])
        assert [c["path"] for c in authentication["anonymous"]["conditions"]] == [
            "/livez",
            "/readyz",
            "/healthz",
        ]
        admission = json.loads(files["admission.json"])
        defaults = admission["plugins"][0]["configuration"]["defaults"]
        assert defaults["enforce"] == "baseline"
        assert apiserver["authentication-config"].endswith("/authentication.json")
    else:
        assert files == {}
        assert "authentication-config" not in apiserver and "profiling" not in apiserver


def millicores(quantity: str) -> int:
    return int(quantity.removesuffix("m")) if quantity.endswith("m") else int(quantity) * 1000


def test_ten_control_planes_ask_less_cpu_of_their_node_than_two_cores_have() -> None:
    """Requests near what a control plane uses at rest: ten of them leave half of a 2-core
    node unasked for, where requests sized for a start's burst kept it to eight."""
    pods = [
        manifests.etcd(plan())["spec"]["template"],
        manifests.control_plane(plan())["spec"]["template"],
    ]
    asked = sum(
        millicores(c["resources"]["requests"]["cpu"])
        for pod in pods
        for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
    )
    assert 10 * asked <= 1000


def test_each_workload_rolls_on_its_own_certificate_generation_and_nothing_else() -> None:
    first, again = manifests.control_plane(plan()), manifests.control_plane(plan())
    assert first == again
    rotated = manifests.control_plane(plan(pki_generation=2))
    assert rotated["spec"]["template"] != first["spec"]["template"]
    # A rotation of the control plane's certificates leaves etcd running ...
    assert (
        manifests.etcd(plan(pki_generation=2))["spec"]["template"]
        == manifests.etcd(plan())["spec"]["template"]
    )
    # ... and one of etcd's rolls it.
    assert (
        manifests.etcd(plan(etcd_pki_generation=2))["spec"]["template"]
        != manifests.etcd(plan())["spec"]["template"]
    )


# -- progress -----------------------------------------------------------------------------------


def workload(ready: int, **status: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "generation": 2},
        "spec": {"replicas": 1},
        "status": {"readyReplicas": ready, "observedGeneration": 2, **status},
    }


def test_ready_once_etcd_and_the_rolled_control_plane_are() -> None:
    rolled = workload(1, updatedReplicas=1, availableReplicas=1, replicas=1)
    assert progress.control_plane(workload(1), rolled, [], []).ready
    rolling = workload(1, updatedReplicas=1, availableReplicas=1, replicas=2)
    seen = progress.control_plane(workload(1), rolling, [], [])
    assert not seen.ready and seen.etcd_ready
    assert seen.message == "waiting for kube-apiserver, kube-controller-manager, kube-scheduler"
    assert progress.control_plane(None, None, [], []).message == "waiting for etcd"


def test_a_roll_is_over_only_once_the_replaced_pod_is_gone() -> None:
    """The Deployment stops counting a pod as it starts terminating, while its apiserver still
    serves (the old certificates, in a rotation)."""
    rolled = workload(1, updatedReplicas=1, availableReplicas=1, replicas=1)
    leaving = {
        "metadata": {
            "name": "control-plane-old",
            "deletionTimestamp": "2026-11-28T23:00:00Z",
            "labels": manifests.labels("c-x", manifests.CONTROL_PLANE),
        }
    }
    assert not progress.control_plane(workload(1), rolled, [leaving], []).ready
    etcd_leaving = {**leaving, "metadata": {**leaving["metadata"],
                                            "labels": manifests.labels("c-x", "etcd")}}  # fmt: skip
    assert progress.control_plane(workload(1), rolled, [etcd_leaving], []).ready


def test_a_stuck_control_plane_says_why() -> None:
    unschedulable = {
        "metadata": {"name": "etcd-0"},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient memory.",
                }
            ]
        },
    }
    crashing = {
        "metadata": {"name": "control-plane-x"},
        "status": {
            # The apiserver is a sidecar: its status is an init container's.
            "initContainerStatuses": [
                {
                    "name": "kube-apiserver",
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "message": "bad flag --x"}},
                },
            ],
            "containerStatuses": [
                {"name": "kube-scheduler", "state": {"waiting": {"reason": "ContainerCreating"}}},
            ],
        },
    }
    claim = {"metadata": {"name": "etcd-data-etcd-0"}, "spec": {}, "status": {"phase": "Pending"}}
    seen = progress.control_plane(None, None, [crashing, unschedulable], [claim])
    assert seen.message == (
        "waiting for etcd: volume claim etcd-data-etcd-0 is Pending (StorageClass the default; "
        "setting hosted-control-plane-storage-class chooses it); container kube-apiserver of "
        "pod control-plane-x is CrashLoopBackOff (exit code 1: bad flag --x); pod etcd-0 cannot "
        "be scheduled: 0/1 nodes are available: 1 Insufficient memory."
    )


def test_a_pki_secret_carries_its_generation_and_the_files_encoded() -> None:
    secret = manifests.pki_secret("c-m-abc", cp.CA, {"ca.crt": b"pem"}, 3, {"x/rotation": "2"})
    meta = secret["metadata"]
    assert (meta["name"], meta["namespace"]) == (cp.CA, "c-m-abc")
    assert meta["labels"] == manifests.labels("c-m-abc")
    assert meta["annotations"] == {manifests.ANNOTATION_PKI_GENERATION: "3", "x/rotation": "2"}
    assert cp.decode(secret["data"]) == {"ca.crt": b"pem"}
