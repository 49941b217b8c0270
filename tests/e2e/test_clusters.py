"""Clusters and nodes through /v3 and kubectl, checked in the management and downstream
clusters with the official client."""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core import pki
from corral.devenv.controlplane import ControlPlane, free_port
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import remove_downstream

GROUP, VERSION = "management.svc.io", "v3"


def encoded(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def condition(cluster: dict, kind: str) -> dict:
    return next((c for c in cluster["status"].get("conditions", []) if c["type"] == kind), {})


@pytest.fixture(scope="module")
def demo(stack: Environment, api: Api) -> dict:
    return api.get(f"/v3/clusters/{stack.cluster_ids[0]}").body


def state(api: Api, cluster_id: str) -> str:
    body = api.get(f"/v3/clusters/{cluster_id}").body
    return str(body["state"])


def node_of(api: Api, cluster: str, name: str) -> dict:
    nodes = api.get(f"/v3/clusters/{cluster}/nodes").body["data"]
    return next(n for n in nodes if n["name"] == name)


# -- import and observation -----------------------------------------------------------------


def test_the_imported_cluster_reports_real_health_and_capacity(
    stack: Environment, demo: dict, downstream: k8s.ApiClient
) -> None:
    assert demo["state"] == "active" and demo["driver"] == "imported"
    status = demo["status"]
    for kind in (
        "Provisioned",
        "AgentDeployed",
        "Ready",
        "Updated",
        "NoDiskPressure",
        "NoMemoryPressure",
    ):
        assert condition(demo, kind)["status"] == "True", kind
    assert condition(demo, "Pending")["status"] == "False"
    nodes = k8s.CoreV1Api(downstream).list_node().items
    assert status["nodeCount"] == len(nodes) == 3
    assert status["capacity"] == {
        "cpu": "12",
        "ephemeral-storage": "300Gi",
        "memory": "48Gi",
        "pods": "330",
    }
    assert status["allocatable"]["cpu"] == "11400m" and status["allocatable"]["memory"] == "45Gi"
    assert status["provider"] == "kwok"
    assert status["version"]["gitVersion"] == "v1.36.3"
    assert status["apiEndpoint"].startswith("https://127.0.0.1:")
    assert base64.b64decode(status["caCert"]).startswith(b"-----BEGIN CERTIFICATE-----")
    assert demo["links"]["nodes"].endswith(f"/v3/clusters/{demo['id']}/nodes")


def test_import_keeps_only_corrals_own_credential(
    stack: Environment,
    demo: dict,
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
    downstream: k8s.ApiClient,
) -> None:
    user_kubeconfig = yaml.safe_load(stack.downstream_kubeconfigs()[0].read_text())
    user_key = user_kubeconfig["users"][0]["user"]["client-key-data"]
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", demo["id"])
    assert user_key not in str(stored) and "kubeConfig" not in str(stored["spec"])
    secret = k8s.CoreV1Api(management).read_namespaced_secret(
        f"{demo['id']}-credential", "svc-system"
    )
    assert user_key not in str(secret.data)
    assert secret.metadata.owner_references[0].name == demo["id"]
    account = k8s.CoreV1Api(downstream).read_namespaced_service_account("corral", "svc-system")
    assert account.metadata.name == "corral"
    token = base64.b64decode(secret.data["token"]).decode()
    review = k8s.AuthenticationV1Api(downstream).create_token_review(
        k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(token=token))
    )
    assert review.status.user.username == "system:serviceaccount:svc-system:corral"


def test_the_local_cluster_is_registered(api: Api) -> None:
    local = api.get("/v3/clusters/local").body
    assert (local["driver"], local["state"]) == ("local", "active")
    assert "remove" not in local["links"]
    assert api.delete("/v3/clusters/local").status == 405


def test_list_with_a_label_selector(api: Api, demo: dict) -> None:
    assert api.put(f"/v3/clusters/{demo['id']}", {"labels": {"env": "e2e"}}).status == 200
    selected = api.get("/v3/clusters?labelSelector=env%3De2e").body["data"]
    assert [c["id"] for c in selected] == [demo["id"]]
    others = api.get("/v3/clusters?labelSelector=env!%3De2e").body["data"]
    assert demo["id"] not in [c["id"] for c in others] and others


def test_partial_update_and_immutable_fields(
    api: Api, demo: dict, crs: k8s.CustomObjectsApi
) -> None:
    updated = api.put(
        f"/v3/clusters/{demo['id']}", {"description": "the demo", "enableNetworkPolicy": True}
    )
    assert updated.status == 200
    assert (updated.body["description"], updated.body["enableNetworkPolicy"]) == ("the demo", True)
    assert updated.body["displayName"] == "demo"  # untouched
    for body in ({"driver": "rke2"}, {"importedConfig": {"kubeConfig": "eA=="}}):
        refused = api.put(f"/v3/clusters/{demo['id']}", body)
        assert refused.status == 422 and refused.body["fieldName"] in body
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", demo["id"])
    assert stored["spec"]["driver"] == "imported"
    api.put(f"/v3/clusters/{demo['id']}", {"enableNetworkPolicy": False})


def test_provisioning_actions_say_what_they_need(api: Api, demo: dict) -> None:
    for name in ("backupEtcd", "restoreFromEtcdBackup", "rotateCertificates"):
        response = api.post(f"/v3/clusters/{demo['id']}?action={name}", {})
        assert response.status == 422
        assert "needs a cluster that corral provisions" in response.body["message"]


def test_non_admins_cannot_see_clusters(api: Api, demo: dict, make_user) -> None:  # type: ignore[no-untyped-def]
    person = make_user()
    assert person.api.get("/v3/clusters").body["data"] == []
    assert person.api.get(f"/v3/clusters/{demo['id']}").status == 404
    assert person.api.post("/v3/clusters", {"name": "x", "importedConfig": {}}).status == 403
    assert person.api.get(f"/k8s/clusters/{demo['id']}/api/v1/nodes").status == 404


# -- bad input ----------------------------------------------------------------------------


# A CA that loads: the server, not the certificate, is what fails.
REAL_CA = base64.b64encode(pki.CertificateAuthority.create("unreachable").cert_pem).decode()


def kubeconfig_b64(server: str, ca: str = "eA==", **user: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "certificate-authority-data": ca}}
        ],
        "users": [{"name": "u", "user": user or {"token": "abc"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }
    return base64.b64encode(yaml.safe_dump(config).encode()).decode()


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (
            {"name": "x", "importedConfig": {"kubeConfig": "%%% not base64"}},
            "InvalidFormat",
            "importedConfig.kubeConfig",
        ),
        (
            {"name": "x", "importedConfig": {"kubeConfig": base64.b64encode(b"[1, 2").decode()}},
            "InvalidFormat",
            "importedConfig.kubeConfig",
        ),
        (
            {"name": "x", "importedConfig": {"kubeConfig": base64.b64encode(b"a: b").decode()}},
            "InvalidFormat",
            "importedConfig.kubeConfig",
        ),
        (
            {"name": "x", "importedConfig": {"kubeConfig": kubeconfig_b64("http://plain:80")}},
            "InvalidFormat",
            "importedConfig.kubeConfig",
        ),
        (
            {
                "name": "x",
                "importedConfig": {"kubeConfig": kubeconfig_b64("https://127.0.0.1:1", exec="{}")},
            },
            "InvalidFormat",
            "importedConfig.kubeConfig",
        ),
        (
            {
                "name": "x",
                "importedConfig": {
                    "kubeConfig": kubeconfig_b64(f"https://127.0.0.1:{free_port()}", REAL_CA)
                },
            },
            "ClusterUnavailable",
            "importedConfig.kubeConfig",
        ),
        (
            {"name": "x", "driver": "floppy", "importedConfig": {"kubeConfig": "eA=="}},
            "InvalidOption",
            "driver",
        ),
        ({"name": "x", "importedConfig": {}}, "MissingRequired", "importedConfig.kubeConfig"),
        ({"importedConfig": {"kubeConfig": "eA=="}}, "MissingRequired", "displayName"),
    ],
)
def test_bad_imports_are_refused_and_store_nothing(
    api: Api, crs: k8s.CustomObjectsApi, body: dict, code: str, field: str | None
) -> None:
    before = len(crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"])
    response = api.post("/v3/clusters", body)
    assert (response.status, response.body["code"]) == (422, code), response.body
    if field:
        assert response.body["fieldName"] == field
    assert len(crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]) == before


def test_a_kubeconfig_without_rights_is_refused(
    stack: Environment, api: Api, crs: k8s.CustomObjectsApi
) -> None:
    plane = stack.downstreams[0]
    weak = yaml.safe_load(plane.kubeconfig_path.read_text())
    weak["users"][0]["user"] = {"token": "not-a-real-token"}
    response = api.post(
        "/v3/clusters",
        {
            "name": "weak",
            "importedConfig": {
                "kubeConfig": base64.b64encode(yaml.safe_dump(weak).encode()).decode()
            },
        },
    )
    assert (response.status, response.body["code"]) == (422, "Unauthorized")


def test_a_provisioned_cluster_without_a_node_to_run_on_is_pending_saying_why(
    api: Api, management: k8s.ApiClient
) -> None:
    created = api.post(
        "/v3/clusters",
        {"type": "cluster", "name": "nowhere", "rke2Config": {"kubernetesVersion": "v1.36.3"}},
    )
    assert created.status == 201 and created.body["id"].startswith("c-m-")
    cluster_id = created.body["id"]
    # The main stack's management cluster has no node: etcd's pod is never scheduled.
    cluster = wait_for(
        "Pending saying what it waits for",
        lambda: (
            (body := api.get(f"/v3/clusters/{cluster_id}").body)
            and condition(body, "Pending").get("message", "").startswith("waiting for etcd: ")
            and body
        ),
        60,
    )
    assert condition(cluster, "Pending")["reason"] == "Provisioning"
    assert condition(cluster, "Provisioned")["status"] == "False"
    assert cluster["state"] == "pending"
    core = k8s.CoreV1Api(management)
    assert {s.metadata.name for s in core.list_namespaced_service(cluster_id).items} == {
        "etcd",
        "kube-apiserver",
    }
    assert api.delete(f"/v3/clusters/{cluster_id}").status == 204
    wait_for(
        "its namespace gone",
        lambda: cluster_id not in {n.metadata.name for n in core.list_namespace().items},
        60,
    )


# -- nodes ----------------------------------------------------------------------------------


def test_nodes_mirror_the_downstream_nodes(api: Api, demo: dict, downstream: k8s.ApiClient) -> None:
    nodes = api.get(f"/v3/clusters/{demo['id']}/nodes").body["data"]
    real = {n.metadata.name: n for n in k8s.CoreV1Api(downstream).list_node().items}
    assert {n["name"] for n in nodes} == set(real)
    node = nodes[0]
    assert node["id"].startswith(f"{demo['id']}:m-")
    status = node["status"]
    assert status["internalNodeStatus"]["capacity"]["cpu"] == "4"
    assert status["nodeLabels"]["kubernetes.io/hostname"] == node["name"]
    assert {c["type"] for c in status["conditions"]} >= {
        "Initialized",
        "Provisioned",
        "Registered",
        "Ready",
        "Updated",
    }
    assert node["worker"] is True and node["controlPlane"] is False
    one = api.get(f"/v3/clusters/{demo['id']}/nodes/{node['id']}").body
    assert one["id"] == node["id"]
    selected = api.get(
        f"/v3/clusters/{demo['id']}/nodes?labelSelector=kubernetes.io/hostname%3D{node['name']}"
    ).body["data"]
    assert [n["name"] for n in selected] == [node["name"]]
    assert api.get(f"/v3/clusters/{demo['id']}/nodes/m-nope").status == 404


def test_taints_round_trip_to_the_downstream_node(
    api: Api, demo: dict, downstream: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(downstream)
    node = node_of(api, demo["id"], "demo-node-1")
    taint = {"key": "dedicated", "value": "e2e", "effect": "NoSchedule"}
    body = {"desiredNodeTaints": [taint], "displayName": "one"}
    assert api.put(f"/v3/clusters/{demo['id']}/nodes/{node['id']}", body).status == 200

    def taints() -> list[tuple[str, str, str]]:
        current = core.read_node("demo-node-1").spec.taints or []
        return [(t.key, t.value, t.effect) for t in current]

    assert wait_for(
        "taint downstream", lambda: taints() == [("dedicated", "e2e", "NoSchedule")], 30
    )
    assert node_of(api, demo["id"], "demo-node-1")["displayName"] == "one"
    api.put(f"/v3/clusters/{demo['id']}/nodes/{node['id']}", {"desiredNodeTaints": []})
    assert wait_for("taint removed", lambda: taints() == [], 30)


@pytest.mark.parametrize(
    "body",
    [
        {"requestedHostname": "other"},
        {"worker": False},
        {"desiredNodeTaints": [{"key": "k", "effect": "Sometimes"}]},
    ],
)
def test_node_updates_that_are_not_allowed(api: Api, demo: dict, body: dict) -> None:
    node = node_of(api, demo["id"], "demo-node-0")
    response = api.put(f"/v3/clusters/{demo['id']}/nodes/{node['id']}", body)
    assert response.status == 422 and response.body["fieldName"] in body


def test_cordon_and_uncordon(api: Api, demo: dict, downstream: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(downstream)
    node = node_of(api, demo["id"], "demo-node-2")
    url = f"/v3/clusters/{demo['id']}/nodes/{node['id']}"
    assert api.post(f"{url}?action=cordon").status == 200
    assert wait_for("cordoned", lambda: core.read_node("demo-node-2").spec.unschedulable, 30)
    wait_for("state", lambda: api.get(url).body["state"] == "cordoned", 30)
    assert api.post(f"{url}?action=uncordon").status == 200
    assert wait_for("uncordoned", lambda: not core.read_node("demo-node-2").spec.unschedulable, 30)


@pytest.fixture
def workload(downstream: k8s.ApiClient) -> Iterator[str]:
    namespace = "e2e-drain"
    k8s.CoreV1Api(downstream).create_namespace(
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace))
    )
    yield namespace
    k8s.CoreV1Api(downstream).delete_namespace(namespace)


def deployment(name: str, replicas: int, node: str | None = None) -> k8s.V1Deployment:
    labels = {"app": name}
    return k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1DeploymentSpec(
            replicas=replicas,
            selector=k8s.V1LabelSelector(match_labels=labels),
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels),
                spec=k8s.V1PodSpec(
                    containers=[k8s.V1Container(name=name, image="nginx:1.27")],
                    node_selector={"kubernetes.io/hostname": node} if node else None,
                ),
            ),
        ),
    )


def test_drain_evicts_the_pods_and_stops_at_a_disruption_budget(
    api: Api, demo: dict, downstream: k8s.ApiClient, workload: str
) -> None:
    core, apps = k8s.CoreV1Api(downstream), k8s.AppsV1Api(downstream)
    apps.create_namespaced_deployment(workload, deployment("web", 2, "demo-node-0"))
    apps.create_namespaced_deployment(workload, deployment("db", 1, "demo-node-1"))
    budget = k8s.V1PodDisruptionBudgetSpec(
        min_available=1, selector=k8s.V1LabelSelector(match_labels={"app": "db"})
    )
    k8s.PolicyV1Api(downstream).create_namespaced_pod_disruption_budget(
        workload, k8s.V1PodDisruptionBudget(metadata=k8s.V1ObjectMeta(name="db"), spec=budget)
    )

    def running(app: str) -> list[k8s.V1Pod]:
        pods = core.list_namespaced_pod(workload, label_selector=f"app={app}").items
        return [
            p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp
        ]

    def on(node: str) -> list[k8s.V1Pod]:
        """The pods on `node` that hold their requests (other modules on this stack may have
        left pods there too)."""
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        return [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]

    def evictable_on(node: str) -> list[k8s.V1Pod]:
        """What a drain that ignores DaemonSets evicts."""
        return [
            p for p in on(node)
            if not any(o.kind == "DaemonSet" for o in p.metadata.owner_references or [])
        ]  # fmt: skip

    wait_for("pods running", lambda: len(running("web")) == 2 and len(running("db")) == 1, 60)
    web_pods = {p.metadata.name for p in running("web")}
    # The node's requests are summed from the pods on it.
    assert wait_for(
        "requests summed",
        lambda: (
            node_of(api, demo["id"], "demo-node-0")["status"]["requested"].get("pods")
            == str(len(on("demo-node-0")))
        ),
        30,
    )
    evictable = len(evictable_on("demo-node-0"))

    free = node_of(api, demo["id"], "demo-node-0")
    url = f"/v3/clusters/{demo['id']}/nodes/{free['id']}"
    assert api.post(f"{url}?action=drain", {"timeout": 30, "ignoreDaemonSets": True}).status == 200
    drained = wait_for(
        "Drained",
        lambda: (c := condition(api.get(url).body, "Drained")) and c.get("status") == "True" and c,
        60,
    )
    assert f"evicted {evictable} pod(s)" in drained.get("message", ""), drained
    assert core.read_node("demo-node-0").spec.unschedulable
    gone = wait_for(
        "web pods gone",
        lambda: not web_pods & {p.metadata.name for p in core.list_namespaced_pod(workload).items},
        60,
    )
    assert gone

    blocked = node_of(api, demo["id"], "demo-node-1")
    url = f"/v3/clusters/{demo['id']}/nodes/{blocked['id']}"
    assert api.post(f"{url}?action=drain", {"timeout": 3}).status == 200
    refused = wait_for(
        "Drained False",
        lambda: (c := condition(api.get(url).body, "Drained")) and c.get("status") == "False" and c,
        60,
    )
    assert refused["reason"] == "DrainTimedOut"
    assert "disruption budget" in refused["message"]
    assert len(running("db")) == 1  # the budget held
    for node in (free, blocked):
        api.post(f"/v3/clusters/{demo['id']}/nodes/{node['id']}?action=uncordon")
    wait_for(
        "uncordoned",
        lambda: (
            not any(core.read_node(n).spec.unschedulable for n in ("demo-node-0", "demo-node-1"))
        ),
        30,
    )


def test_bad_drain_options_are_422(api: Api, demo: dict) -> None:
    node = node_of(api, demo["id"], "demo-node-2")
    url = f"/v3/clusters/{demo['id']}/nodes/{node['id']}"
    for body in ({"timeout": 0}, {"force": "yes"}, {"gracePeriod": "soon"}):
        response = api.post(f"{url}?action=drain", body)
        assert response.status == 422 and response.body["fieldName"] in body


# -- kubectl through corral ----------------------------------------------------------------


def test_kubectl_works_with_the_generated_kubeconfig_and_only_for_its_cluster(
    api: Api, demo: dict, devkube: Path, tmp_path: Path, stack: Environment
) -> None:
    response = api.post(f"/v3/clusters/{demo['id']}?action=generateKubeconfig")
    assert response.status == 200
    config = base64.b64decode(response.body["config"])
    path = tmp_path / "kubeconfig"
    path.write_bytes(config)
    parsed = yaml.safe_load(config)
    assert (
        parsed["clusters"][0]["cluster"]["server"] == f"{stack.api_url}/k8s/clusters/{demo['id']}"
    )
    token = parsed["users"][0]["user"]["token"]
    assert token.startswith(f"kubeconfig-admin.{demo['id']}:")

    out = subprocess.run(
        [str(devkube), "kubectl", "--kubeconfig", str(path), "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(out.stdout.split()) == [f"node/demo-node-{i}" for i in range(3)]
    whoami = subprocess.run(
        [
            str(devkube),
            "kubectl",
            "--kubeconfig",
            str(path),
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert whoami.stdout == "u-admin"

    assert [c["name"] for c in parsed["contexts"]] == [demo["id"]]
    endpoint = {"enabled": True, "fqdn": "demo.example.test", "caCerts": "-----BEGIN X-----"}
    assert (
        api.put(f"/v3/clusters/{demo['id']}", {"localClusterAuthEndpoint": endpoint}).status == 200
    )
    direct = yaml.safe_load(
        base64.b64decode(
            api.post(f"/v3/clusters/{demo['id']}?action=generateKubeconfig").body["config"]
        )
    )
    assert [c["name"] for c in direct["contexts"]] == [demo["id"], f"{demo['id']}-fqdn"]
    assert direct["clusters"][1]["cluster"]["server"] == "https://demo.example.test"
    api.put(f"/v3/clusters/{demo['id']}", {"localClusterAuthEndpoint": {"enabled": False}})
    token = direct["users"][0]["user"]["token"]
    # Generating again replaced the first token: same name, new key (spec 7: key mismatch).
    replaced = api.as_token(parsed["users"][0]["user"]["token"]).get(
        f"/k8s/clusters/{demo['id']}/api"
    )
    assert (replaced.status, replaced.body["message"]) == (422, "invalid auth token value")

    holder = api.as_token(token)
    assert holder.get(f"/k8s/clusters/{demo['id']}/api/v1/namespaces").status == 200
    assert holder.get("/k8s/clusters/local/api/v1/namespaces").status == 401
    assert holder.get("/v3/tokens").status == 401  # a kubeconfig token is for its cluster only
    listed = {t["id"]: t for t in api.get("/v3/tokens").body["data"]}
    record = listed[token.split(":")[0]]
    assert record["clusterName"] == demo["id"] and record["isDerived"] is True
    assert record["ttl"] == 960 * 60_000


def test_the_proxy_streams_watches(api: Api, demo: dict) -> None:
    url = f"{api.base}/k8s/clusters/{demo['id']}/api/v1/nodes?watch=true&timeoutSeconds=2"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api.token}"})
    with urllib.request.urlopen(request, timeout=30, context=api.context) as response:
        events = [json.loads(line) for line in response if line.strip()]
    assert {(e["type"], e["object"]["metadata"]["name"]) for e in events} == {
        ("ADDED", f"demo-node-{i}") for i in range(3)
    }


# -- an unreachable cluster, and deletion -------------------------------------------------


@pytest.fixture(scope="module")
def spare(
    stack: Environment, api: Api, crs: k8s.CustomObjectsApi
) -> Iterator[tuple[ControlPlane, str]]:
    plane = stack.add_downstream("spare", nodes=1)
    imported = {"kubeConfig": encoded(plane.kubeconfig_path)}
    created = api.post("/v3/clusters", {"name": "spare", "importedConfig": imported})
    assert created.status == 201, created.body
    cluster_id = created.body["id"]
    wait_for(
        "spare active", lambda: api.get(f"/v3/clusters/{cluster_id}").body["state"] == "active", 60
    )
    yield plane, cluster_id
    remove_downstream(stack, crs, plane)


def test_deleting_a_node_removes_it_downstream_and_its_record(
    api: Api, spare: tuple[ControlPlane, str], crs: k8s.CustomObjectsApi
) -> None:
    plane, cluster_id = spare
    spare_core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(plane.kubeconfig_path)))
    spare_core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name="spare-extra")))
    record = wait_for(
        "the extra node mirrored",
        lambda: next(
            (
                n
                for n in api.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]
                if n["name"] == "spare-extra"
            ),
            None,
        ),
        30,
    )
    assert api.delete(f"/v3/clusters/{cluster_id}/nodes/{record['id']}").status == 204
    assert "spare-extra" not in {n.metadata.name for n in spare_core.list_node().items}
    assert wait_for(
        "the Node CR to go",
        lambda: (
            record["id"].split(":")[1]
            not in {
                n["metadata"]["name"]
                for n in crs.list_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodes")[
                    "items"
                ]
            }
        ),
        30,
    )
    # /v3 reads the records from its watch cache, which learns of the deletion after kube.
    assert wait_for(
        "the record gone from /v3",
        lambda: api.get(f"/v3/clusters/{cluster_id}/nodes/{record['id']}").status == 404,
        30,
    )


def test_an_unreachable_cluster_turns_not_ready_and_recovers(
    api: Api, spare: tuple[ControlPlane, str]
) -> None:
    plane, cluster_id = spare
    plane.stop_apiserver()
    down = wait_for(
        "Ready False",
        lambda: (
            (c := condition(api.get(f"/v3/clusters/{cluster_id}").body, "Ready"))
            and c["status"] == "False"
            and c
        ),
        60,
    )
    assert down["reason"] == "Unreachable" and "cannot reach" in down["message"]
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "unavailable"
    plane.start_apiserver()
    plane.wait_apiserver()
    assert wait_for(
        "Ready True again",
        lambda: condition(api.get(f"/v3/clusters/{cluster_id}").body, "Ready")["status"] == "True",
        60,
    )


def test_deleting_a_cluster_removes_what_corral_kept(
    api: Api,
    spare: tuple[ControlPlane, str],
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
) -> None:
    plane, cluster_id = spare
    core = k8s.CoreV1Api(management)
    assert crs.list_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodes")["items"]
    assert api.delete(f"/v3/clusters/{cluster_id}").status == 204

    def gone() -> bool:
        clusters = crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
        namespaces = {n.metadata.name for n in core.list_namespace().items}
        secrets = {s.metadata.name for s in core.list_namespaced_secret("svc-system").items}
        return (
            cluster_id not in {c["metadata"]["name"] for c in clusters}
            and cluster_id not in namespaces
            and f"{cluster_id}-credential" not in secrets
        )

    assert wait_for("cluster, namespace and credential gone", gone, 90)
    spare_core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(plane.kubeconfig_path)))
    assert wait_for(
        "corral's account removed downstream",
        lambda: "svc-system" not in {n.metadata.name for n in spare_core.list_namespace().items},
        60,
    )
