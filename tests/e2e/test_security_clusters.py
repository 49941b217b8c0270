"""Clusters and nodes against hostile or careless clients (issue 9): taints validated as
Kubernetes validates them, a cluster observer that reports a failed sync and goes on, imports
that fail with 4xx whatever they carry, and one Cluster per downstream cluster."""

from __future__ import annotations

import base64
import http.server
import secrets
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from corral.core import pki
from corral.devenv.controlplane import ControlPlane
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api, Response

GROUP, VERSION = "management.svc.io", "v3"
REFUSED_TAINT = "e2e.corral.test/refused"
POLICY = "corral-e2e-refuse-taint"
QUOTA = {
    "resourceQuota": {"limit": {"limitsCpu": "1", "limitsMemory": "1Gi", "pods": "10"}},
    "namespaceDefaultResourceQuota": {
        "limit": {"limitsCpu": "500m", "limitsMemory": "512Mi", "pods": "5"}
    },
}


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


def node_record(crs: k8s.CustomObjectsApi, cluster: str, node: str) -> dict:
    records = crs.list_namespaced_custom_object(GROUP, VERSION, cluster, "nodes")["items"]
    return next(r for r in records if (r.get("status") or {}).get("nodeName") == node)


def condition(obj: dict, kind: str) -> dict:
    found = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in found if c["type"] == kind), {})


def cluster_condition(crs: k8s.CustomObjectsApi, cluster: str, kind: str) -> dict:
    return condition(crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster), kind)


# -- taints -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "taints",
    [
        [{"key": "k", "value": {"a": 1}, "effect": "NoSchedule"}],
        [{"key": "bad key!", "effect": "NoSchedule"}],
        [{"key": "k", "value": "x" * 64, "effect": "NoSchedule"}],
        [{"key": "Upper.Case/k", "effect": "NoSchedule"}],
        [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "v", "effect": "NoSchedule"}],
        [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(65)],
    ],
)
def test_taints_kubernetes_would_refuse_are_422_and_change_nothing(
    api: Api, crs: k8s.CustomObjectsApi, cluster: str, taints: list
) -> None:
    before = node_record(crs, cluster, "demo-node-0")
    url = f"/v3/clusters/{cluster}/nodes/{before['metadata']['name']}"
    response = api.put(url, {"desiredNodeTaints": taints, "displayName": "changed"})
    assert (response.status, response.body["fieldName"]) == (422, "desiredNodeTaints")
    after = node_record(crs, cluster, "demo-node-0")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    "taints",
    [
        [{"key": "bad key!", "effect": "NoSchedule"}],
        [{"key": "k", "value": "a b", "effect": "NoSchedule"}],
        [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}],
        [{"key": "a" * 254 + "/k", "effect": "NoSchedule"}],
    ],
)
def test_the_crd_refuses_bad_taints_written_around_the_api(
    crs: k8s.CustomObjectsApi, cluster: str, taints: list
) -> None:
    name = node_record(crs, cluster, "demo-node-0")["metadata"]["name"]
    with pytest.raises(ApiException) as refused:
        crs.patch_namespaced_custom_object(
            GROUP, VERSION, cluster, "nodes", name, {"spec": {"desiredNodeTaints": taints}}
        )
    assert refused.value.status == 422


@pytest.fixture
def refusing_policy(downstream: k8s.ApiClient) -> Iterator[None]:
    """A ValidatingAdmissionPolicy in the downstream cluster that refuses one taint: a cluster
    refusing what corral applies, as a policy engine there would."""
    admission = k8s.AdmissionregistrationV1Api(downstream)
    admission.create_validating_admission_policy(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["nodes"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "!has(object.spec.taints) || "
                        f"object.spec.taints.all(t, t.key != '{REFUSED_TAINT}')",
                        "message": "the e2e policy refuses this taint",
                    }
                ],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY},
            "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
        }
    )
    core = k8s.CoreV1Api(downstream)
    probe = {"spec": {"taints": [{"key": REFUSED_TAINT, "effect": "NoSchedule"}]}}

    def in_force() -> bool:
        try:
            core.patch_node("demo-node-2", probe, dry_run="All")
        except ApiException:
            return True
        return False

    wait_for("the policy in force", in_force, 30)
    yield
    admission.delete_validating_admission_policy_binding(POLICY)
    admission.delete_validating_admission_policy(POLICY)


def test_a_taint_the_cluster_refuses_is_reported_and_the_other_syncs_go_on(
    api: Api,
    crs: k8s.CustomObjectsApi,
    cluster: str,
    downstream: k8s.ApiClient,
    refusing_policy: None,
) -> None:
    core = k8s.CoreV1Api(downstream)
    record = node_record(crs, cluster, "demo-node-1")["metadata"]["name"]
    url = f"/v3/clusters/{cluster}/nodes/{record}"
    taint = {"key": REFUSED_TAINT, "effect": "NoSchedule"}
    assert api.put(url, {"desiredNodeTaints": [taint]}).status == 200

    failed = wait_for(
        "the node's Updated False",
        lambda: (
            (c := condition(node_record(crs, cluster, "demo-node-1"), "Updated")).get("reason")
            == "ApplyFailed"
            and c
        ),
        30,
    )
    assert failed["status"] == "False" and "the e2e policy refuses this taint" in failed["message"]
    reported = wait_for(
        "the cluster's Updated False",
        lambda: (c := cluster_condition(crs, cluster, "Updated")).get("status") == "False" and c,
        30,
    )
    assert reported["reason"] == "SyncFailed"
    assert "node demo-node-1" in reported["message"] and "refuses this taint" in reported["message"]

    # The other syncs of the cluster go on: node mirror (the failing node included) and
    # projects.
    mark = secrets.token_hex(4)
    for node in ("demo-node-1", "demo-node-2"):
        core.patch_node(node, {"metadata": {"labels": {"e2e-mark": mark}}})
    for node in ("demo-node-1", "demo-node-2"):
        wait_for(
            f"{node}'s new label mirrored",
            lambda n=node: (
                node_record(crs, cluster, n)["status"]["nodeLabels"].get("e2e-mark") == mark
            ),
            30,
        )
    project = api.post(
        "/v3/projects",
        {"type": "project", "name": f"p-{mark}", "clusterId": cluster, **QUOTA},
    )
    assert project.status == 201, project.body
    namespace = api.post(
        f"/v3/clusters/{cluster}/namespaces",
        {"type": "namespace", "name": f"ns-{mark}", "projectId": project.body["id"]},
    )
    assert namespace.status == 201, namespace.body
    wait_for(
        "the project's quota in its namespace",
        lambda: core.read_namespaced_resource_quota("corral-project-quota", f"ns-{mark}"),
        30,
    )
    assert cluster_condition(crs, cluster, "Ready")["status"] == "True"

    assert api.put(url, {"desiredNodeTaints": []}).status == 200
    wait_for(
        "the node's Updated True again",
        lambda: (
            condition(node_record(crs, cluster, "demo-node-1"), "Updated").get("status") == "True"
        ),
        30,
    )
    recovered = wait_for(
        "the cluster's Updated True again",
        lambda: (c := cluster_condition(crs, cluster, "Updated")).get("status") == "True" and c,
        30,
    )
    assert recovered["reason"] == "Applied"
    api.delete(f"/v3/projects/{project.body['id']}")


# -- imports: whatever they carry, a 4xx ------------------------------------------------------


def kubeconfig_b64(server: str, ca: bytes = b"x", **user: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": user or {"token": "abc"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }
    return base64.b64encode(yaml.safe_dump(config).encode()).decode()


class Garbage(http.server.BaseHTTPRequestHandler):
    """Answers every request with something that is not JSON, labelled as JSON; with
    `version_ok`, a real-looking /version first, so that the next calls meet the garbage."""

    version_ok = False

    def _answer(self) -> None:
        if self.version_ok and self.path.startswith("/version"):
            body = b'{"major": "1", "minor": "36", "gitVersion": "v1.36.3"}'
        else:
            body = b'{"kind": "Status", "apiVersion": <<garbage'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = _answer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def fake_kubernetes(tmp_path: Path) -> Iterator[Callable[[bool], tuple[str, bytes]]]:
    """HTTPS servers on 127.0.0.1 answering garbage; returns (server URL, CA)."""
    servers: list[http.server.ThreadingHTTPServer] = []
    authority = pki.CertificateAuthority.create("fake-kubernetes-ca")
    crt, key = authority.issue_server("fake-kubernetes", ["127.0.0.1"]).write(tmp_path, "tls")

    def start(version_ok: bool) -> tuple[str, bytes]:
        handler = type("Handler", (Garbage,), {"version_ok": version_ok})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(crt, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"https://127.0.0.1:{server.server_address[1]}", authority.cert_pem

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def stored(crs: k8s.CustomObjectsApi, management: k8s.ApiClient) -> tuple[int, int]:
    clusters = crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
    secrets_ = k8s.CoreV1Api(management).list_namespaced_secret("svc-system").items
    return len(clusters), len(secrets_)


@pytest.mark.parametrize("config", ["a kubeconfig", ["a"], 5])
def test_an_imported_config_that_is_no_object_is_422_and_stores_nothing(
    api: Api, crs: k8s.CustomObjectsApi, management: k8s.ApiClient, config: object
) -> None:
    before = stored(crs, management)
    response = api.post("/v3/clusters", {"name": "x", "importedConfig": config})
    assert (response.status, response.body["fieldName"]) == (422, "importedConfig"), response.body
    assert stored(crs, management) == before


@pytest.mark.parametrize(
    "change",
    [
        {"server": "https://127.0.0.1:99999"},
        {"server": "https://[::1"},
        {"token": "a\r\nX-Injected: 1"},
        {"certificate-authority-data": base64.b64encode(b"\xff\xfe").decode()},
    ],
)
def test_a_kubeconfig_with_one_bad_field_is_422_and_stores_nothing(
    stack: Environment,
    api: Api,
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
    change: dict[str, str],
) -> None:
    """The demo cluster's own kubeconfig (a real CA, a server that answers) with one field
    spoilt, so that nothing but that field can fail."""
    config = yaml.safe_load(stack.downstreams[0].kubeconfig_path.read_text())
    for field, value in change.items():
        section = "users" if field == "token" else "clusters"
        entry = config[section][0]["user" if section == "users" else "cluster"]
        if field == "token":
            entry.clear()
        entry[field] = value
    encoded = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    before = stored(crs, management)
    response = api.post("/v3/clusters", {"name": "x", "kubeConfig": encoded})
    assert response.status == 422, response.body
    assert response.body["fieldName"] == "importedConfig.kubeConfig"
    assert stored(crs, management) == before


@pytest.mark.parametrize("version_ok", [False, True])
def test_a_server_that_is_not_kubernetes_is_422_and_stores_nothing(
    api: Api,
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
    fake_kubernetes: Callable[[bool], tuple[str, bytes]],
    version_ok: bool,
) -> None:
    server, ca = fake_kubernetes(version_ok)
    before = stored(crs, management)
    response = api.post(
        "/v3/clusters", {"name": "fake", "kubeConfig": kubeconfig_b64(server, ca=ca)}
    )
    assert (response.status, response.body["code"]) == (422, "ClusterUnavailable"), response.body
    assert "does not answer as a Kubernetes API server" in response.body["message"]
    assert response.body["fieldName"] == "importedConfig.kubeConfig"
    assert stored(crs, management) == before


# -- one Cluster per downstream cluster ----------------------------------------------------


def import_body(path: Path, name: str) -> dict:
    encoded = base64.b64encode(path.read_bytes()).decode()
    return {"type": "cluster", "name": name, "importedConfig": {"kubeConfig": encoded}}


def test_importing_an_imported_cluster_again_is_409_and_stores_nothing(
    stack: Environment,
    api: Api,
    cluster: str,
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
) -> None:
    before = stored(crs, management)
    again = api.post("/v3/clusters", import_body(stack.downstreams[0].kubeconfig_path, "again"))
    assert (again.status, again.body["code"]) == (409, "AlreadyExists"), again.body
    assert cluster in again.body["message"]
    assert stored(crs, management) == before


def test_importing_the_management_cluster_is_409(
    stack: Environment, api: Api, crs: k8s.CustomObjectsApi, management: k8s.ApiClient
) -> None:
    before = stored(crs, management)
    itself = api.post("/v3/clusters", import_body(stack.management_kubeconfig, "itself"))
    assert (itself.status, itself.body["code"]) == (409, "AlreadyExists"), itself.body
    assert "local" in itself.body["message"]
    assert stored(crs, management) == before


def test_concurrent_imports_of_one_cluster_make_one_cluster(
    stack: Environment, api: Api, crs: k8s.CustomObjectsApi, management: k8s.ApiClient,
    add_downstream: Callable[..., ControlPlane],
) -> None:  # fmt: skip
    plane = add_downstream("twin", nodes=1)
    twin = k8s.CoreV1Api(k8s_config.new_client_from_config(str(plane.kubeconfig_path)))
    identity = twin.read_namespace("kube-system").metadata.uid
    body = import_body(plane.kubeconfig_path, "twin")
    with ThreadPoolExecutor(4) as pool:
        answers: list[Response] = list(pool.map(lambda _: api.post("/v3/clusters", body), range(4)))
    assert sorted(a.status for a in answers) == [201, 409, 409, 409], [a.body for a in answers]
    winner = next(a.body["id"] for a in answers if a.status == 201)
    for loser in (a for a in answers if a.status == 409):
        assert loser.body["code"] == "AlreadyExists"
        assert winner in loser.body["message"]
    clusters = crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
    same = [
        c["metadata"]["name"]
        for c in clusters
        if (c["metadata"].get("annotations") or {}).get("management.svc.io/kube-system-uid")
        == identity
    ]
    assert same == [winner]

    # Deleting the Cluster frees the identity once corral's agent has been removed.
    assert api.delete(f"/v3/clusters/{winner}").status == 204
    wait_for(
        "the claim gone with its Cluster",
        lambda: (
            not [
                s
                for s in k8s.CoreV1Api(management).list_namespaced_secret("svc-system").items
                if s.type == "management.svc.io/cluster-claim"
                and (s.metadata.annotations or {}).get("management.svc.io/cluster-id") == winner
            ]
        ),
        90,
    )
    again = api.post("/v3/clusters", body)
    assert again.status == 201, again.body
    assert api.delete(f"/v3/clusters/{again.body['id']}").status == 204
