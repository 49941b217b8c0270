"""The `/k8s/clusters/{id}` proxy and cluster-scoped tokens, attacked as a hostile client would:
absolute URLs smuggled into the proxied path, kubeconfig tokens used beyond their cluster's
proxy, token values that are not text. Checked with a listener of our own on 127.0.0.1 and, in
the downstream cluster, with the official client."""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api, Response
from .conftest import Person, new_person

GROUP, VERSION = "management.svc.io", "v3"
MARKER = "answered-by-the-test-listener"


class _Recorder(socketserver.BaseRequestHandler):
    """Records every connection and what arrived on it, then answers like a web server."""

    def handle(self) -> None:
        self.request.settimeout(2)
        try:
            data = self.request.recv(65536)
        except OSError:
            data = b""
        self.server.received.append(data)  # type: ignore[attr-defined]
        body = json.dumps({"kind": "Status", "message": MARKER}).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n"
        head += "Content-Type: application/json\r\nConnection: close\r\n\r\n"
        self.request.sendall(head.encode() + body)


class Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.received: list[bytes] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def raw(api: Api, method: str, path: str, body: bytes | None = None, **headers: Any) -> Response:
    """A request whose path goes on the wire exactly as written (no client normalises it)."""
    host, port = api.base.removeprefix("https://").rsplit(":", 1)
    connection = http.client.HTTPSConnection(host, int(port), context=api.context, timeout=30)
    try:
        connection.putrequest(method, path, skip_accept_encoding=True)
        sent = {"Accept": "application/json", **headers}
        if api.token and "Authorization" not in sent:
            sent["Authorization"] = f"Bearer {api.token}"
        if body is not None:
            sent |= {"Content-Type": "application/json", "Content-Length": str(len(body))}
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        data = answer.read()
        try:
            parsed = json.loads(data) if data.strip() else None
        except ValueError:
            parsed = data.decode(errors="replace")
        return Response(answer.status, dict(answer.getheaders()), parsed)
    finally:
        connection.close()


@dataclass
class Callers:
    cluster: str
    admin: Api
    reader: Person
    admin_kubeconfig: Api
    reader_kubeconfig: Api


def kubeconfig_token(api: Api, cluster: str) -> str:
    generated = api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig")
    assert generated.status == 200, generated.body
    config = yaml.safe_load(base64.b64decode(generated.body["config"]))
    return str(config["users"][0]["user"]["token"])


@pytest.fixture(scope="module")
def callers(stack: Environment, api: Api) -> Callers:
    """The admin, and a user with the weakest role there is (read-only in one project)."""
    cluster = stack.cluster_ids[0]
    project = api.post(
        "/v3/projects",
        {"type": "project", "name": f"sec-{secrets.token_hex(3)}", "clusterId": cluster},
    )
    assert project.status == 201, project.body
    reader = new_person(api)
    granted = api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": project.body["id"], "userId": reader.id, "roleTemplateId": "read-only"},
    )
    assert granted.status == 201, granted.body
    wait_for(
        "the reader sees the cluster",
        lambda: reader.api.get(f"/v3/clusters/{cluster}").status == 200,
        30,
    )
    return Callers(
        cluster,
        api,
        reader,
        api.as_token(kubeconfig_token(api, cluster)),
        api.as_token(kubeconfig_token(reader.api, cluster)),
    )


# -- absolute URLs in the proxied path ------------------------------------------------------


def smuggled_paths(cluster: str, port: int) -> list[str]:
    target = f"127.0.0.1:{port}/x"
    return [
        f"/k8s/clusters/{cluster}/http://{target}",
        f"/k8s/clusters/{cluster}//http://{target}",
        f"/k8s/clusters/{cluster}/http:%2F%2F{target}",
        f"/k8s/clusters/{cluster}/https://{target}",
        f"/k8s/clusters/{cluster}/HTTP://{target}",
        f"/k8s/clusters/{cluster}/%2F%2F{target}",
        f"/k8s/clusters/{cluster}//{target}",
        f"/k8s/clusters/{cluster}/api/%2E%2E/%2E%2E/http://{target}",
        f"/k8s/clusters/{cluster}/api/../../http://{target}",
        f"/k8s/clusters/{cluster}/../../../http://{target}",
    ]


@pytest.mark.parametrize("who", ["admin", "reader", "admin_kubeconfig", "reader_kubeconfig"])
def test_no_path_reaches_another_host(callers: Callers, listener: Listener, who: str) -> None:
    caller = callers.reader.api if who == "reader" else getattr(callers, who)
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    wrong = []
    for path in smuggled_paths(callers.cluster, listener.port):
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            data = None if method == "GET" else body.encode()
            answer = raw(caller, method, path, data)
            if not 400 <= answer.status < 500 or MARKER in json.dumps(answer.body):
                wrong.append((method, path, answer.status))
    assert wrong == []
    assert listener.received == []


def test_ordinary_proxying_still_works(
    callers: Callers, listener: Listener, downstream: k8s.ApiClient
) -> None:
    base = f"/k8s/clusters/{callers.cluster}"
    listed = raw(callers.admin_kubeconfig, "GET", f"{base}/api/v1/namespaces")
    assert listed.status == 200
    assert "default" in {n["metadata"]["name"] for n in listed.body["items"]}
    selected = raw(
        callers.admin,
        "GET",
        f"{base}/api/v1/namespaces?labelSelector=kubernetes.io%2Fmetadata.name%3Ddefault",
    )
    assert [n["metadata"]["name"] for n in selected.body["items"]] == ["default"]
    # The reader's own (impersonated) identity decides downstream: not the whole cluster.
    assert raw(callers.reader_kubeconfig, "GET", f"{base}/api/v1/namespaces").status == 403

    # corral's credential reached the cluster's server: only it may impersonate the caller.
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    path = f"{base}/apis/authentication.k8s.io/v1/selfsubjectreviews"
    for caller, user in ((callers.admin_kubeconfig, "u-admin"),
                         (callers.reader_kubeconfig, callers.reader.id)):  # fmt: skip
        seen = raw(caller, "POST", path, json.dumps(review).encode())
        assert seen.status == 201, seen.body
        assert seen.body["status"]["userInfo"]["username"] == user

    # A write with a body goes through and lands downstream.
    name = f"sec-{secrets.token_hex(3)}"
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    created = raw(
        callers.admin_kubeconfig,
        "POST",
        f"{base}/api/v1/namespaces/default/configmaps",
        json.dumps(configmap).encode(),
    )
    assert created.status == 201, created.body
    core = k8s.CoreV1Api(downstream)
    assert core.read_namespaced_config_map(name, "default").metadata.name == name
    core.delete_namespaced_config_map(name, "default")
    assert listener.received == []


# -- what cluster-scoped tokens may do ------------------------------------------------------


def test_kubeconfig_tokens_work_only_on_their_clusters_proxy(
    callers: Callers, downstream: k8s.ApiClient
) -> None:
    cluster = callers.cluster
    namespace = f"sec-{secrets.token_hex(3)}"
    for holder in (callers.admin_kubeconfig, callers.reader_kubeconfig):
        for method, path, body in (
            ("GET", f"/v3/clusters/{cluster}", None),
            ("GET", f"/v3/clusters/{cluster}/nodes", None),
            ("GET", f"/v3/clusters/{cluster}/namespaces", None),
            ("POST", f"/v3/clusters/{cluster}/namespaces", {"name": namespace}),
            ("POST", f"/v3/clusters/{cluster}?action=generateKubeconfig", None),
            ("POST", "/v3/tokens", {"description": "replacement"}),
            ("POST", "/v3/tokens", {"clusterId": cluster}),
            ("GET", "/v3/tokens", None),
            ("GET", f"/v3/cluster/{cluster}", None),
            ("GET", "/k8s/clusters/local/api", None),
        ):
            answer = holder.request(method, path, body)
            assert answer.status == 401, (path, answer.body)
            assert answer.body["message"] == f"token is valid only for cluster {cluster}"
        assert holder.get(f"/k8s/clusters/{cluster}/api").status == 200
    names = {n.metadata.name for n in k8s.CoreV1Api(downstream).list_namespace().items}
    assert namespace not in names
    # The refused generateKubeconfig did not replace the token: it still works.
    assert callers.admin_kubeconfig.get(f"/k8s/clusters/{cluster}/api").status == 200


def test_a_derived_token_scoped_to_a_cluster_is_like_a_kubeconfig_token(callers: Callers) -> None:
    cluster = callers.cluster
    created = callers.reader.api.post("/v3/tokens", {"clusterId": cluster})
    assert created.status == 201, created.body
    assert created.body["clusterName"] == cluster
    scoped = callers.admin.as_token(created.body["token"])
    assert scoped.get(f"/k8s/clusters/{cluster}/api").status == 200
    assert scoped.get(f"/v3/clusters/{cluster}").status == 401
    assert scoped.post("/v3/tokens", {}).status == 401


def test_a_token_cannot_be_scoped_to_a_cluster_the_caller_cannot_see(
    callers: Callers, api: Api, crs: k8s.CustomObjectsApi
) -> None:
    outsider = new_person(api)

    def owned() -> set[str]:
        label = f"authn.management.svc.io/token-userId={outsider.id}"
        items = crs.list_cluster_custom_object(GROUP, VERSION, "tokens", label_selector=label)
        return {t["metadata"]["name"] for t in items["items"]}

    before = owned()
    for cluster in (callers.cluster, "c-nothere", "local"):
        refused = outsider.api.post("/v3/tokens", {"clusterId": cluster})
        assert refused.status == 422, refused.body
        assert (refused.body["code"], refused.body["fieldName"]) == (
            "InvalidReference",
            "clusterId",
        )
        assert refused.body["type"] == "error"
    assert api.post("/v3/tokens", {"clusterId": "c-nothere"}).status == 422
    assert owned() == before


# -- token values that are not text ---------------------------------------------------------


def test_token_keys_with_bytes_that_are_not_utf8_are_refused(callers: Callers) -> None:
    assert callers.reader.api.token is not None
    name = callers.reader.api.token.split(":")[0]
    anonymous = callers.admin.as_token(None)
    # http.client sends a header's characters below 256 as single bytes (latin-1).
    for value in (b"\xff\xfe", b"abc\x80", b"\xc3(", b"\xed\xa0\x80"):
        key = value.decode("latin-1")
        for headers in (
            {"Authorization": f"Bearer {name}:{key}"},
            {"Cookie": f"R_SESS={name}:{key}"},
            {"Authorization": f"Basic {key}"},
        ):
            answer = raw(anonymous, "GET", "/v3/tokens", **headers)
            assert (answer.status, answer.body["message"]) == (422, "invalid auth token value")
            assert answer.body["type"] == "error" and answer.body["code"] == "InvalidToken"
    # The real session of that user is unharmed.
    assert callers.reader.api.get("/v3/tokens").status == 200
