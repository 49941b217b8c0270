"""What a hostile client could make corral reach, or learn of what it reached, through HTTP
(issue #21): files of the operator's host through a node driver's file url, whether a port
is open through a driver's download error, forged lines in the API server's log through an
exec command, a cookie's WebSocket without an Origin, and cloud metadata addresses as S3
endpoints or OpenID Connect issuers. Each test makes the request a client would and checks
what corral answered, stored and logged."""

from __future__ import annotations

import hashlib
import secrets
import socket
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .. import fake_driver
from .api import Api, Response, handshake
from .conftest import Person
from .test_projects import create_namespace, create_project, unique
from .test_provisioning_admission import WITH_S3, clusters, refused_and_nothing_stored

__all__ = ["clusters"]  # the fixture, shared with test_provisioning_admission

READY_TIMEOUT = 60
LINK_LOCAL = "allow-link-local-endpoints"
GROUP, VERSION = names.GROUP, names.VERSION


@pytest.fixture
def drivers(api: Api) -> Iterator[Callable[..., Response]]:
    """Creates drivers through /v3 as the admin; deletes those made after the test."""
    made: list[str] = []

    def create(**body: Any) -> Response:
        created = api.post("/v3/nodedrivers", {"type": "nodeDriver", "active": True, **body})
        if created.status == 201:
            made.append(created.body["id"])
        return created

    yield create
    for name in made:
        assert api.delete(f"/v3/nodedrivers/{name}").status in (204, 404)


def driver_name() -> str:
    return f"reach{secrets.token_hex(4)}"


def condition(body: dict[str, Any], type: str) -> dict[str, Any] | None:
    found = [c for c in body["status"].get("conditions") or [] if c["type"] == type]
    current = found and found[0].get("observedGeneration") == body["metadata"]["generation"]
    return found[0] if current else None


def settled(api: Api, name: str, type: str, status: str) -> dict[str, Any]:
    return wait_for(
        f"node driver {name} {type}={status}",
        lambda: (
            (c := condition(api.get(f"/v3/nodedrivers/{name}").body, type))
            and c["status"] == status
            and c
        ),
        READY_TIMEOUT,
    )


def refused_field(response: Response, field: str) -> None:
    assert response.status == 422, response.body
    assert (response.body["type"], response.body["fieldName"]) == ("error", field), response.body


# -- node drivers: file urls --------------------------------------------------------------------


def test_a_file_url_may_name_only_a_file_below_the_configured_directory(
    api: Api, stack: Environment, drivers: Callable[..., Response], crs: k8s.CustomObjectsApi
) -> None:
    before = {d["id"] for d in api.get("/v3/nodedrivers").body["data"]}
    for url in (
        "file:///etc/shadow",
        "file:///proc/self/environ",
        f"file://{stack.driver_files}/../../../etc/shadow",
        f"file://{stack.driver_files}",
    ):
        refused_field(drivers(name=driver_name(), url=url), "url")
    assert {d["id"] for d in api.get("/v3/nodedrivers").body["data"]} == before
    stored = crs.list_cluster_custom_object(GROUP, VERSION, "nodedrivers")["items"]
    assert {o["metadata"]["name"] for o in stored} == before

    # Below it, a driver is downloaded and run.
    name = driver_name()
    path = fake_driver.write(stack.driver_files / name, stack.root / f"{name}-state", name)
    assert drivers(name=name, url=path.as_uri()).status == 201
    settled(api, name, "Ready", "True")


def test_the_operator_reads_no_file_outside_the_directory_links_resolved(
    api: Api, stack: Environment, crs: k8s.CustomObjectsApi, tmp_path: Path
) -> None:
    """The operator checks again, symbolic links resolved: the API server may not see its
    files, and a NodeDriver written with kubectl never passes the API."""
    outside = fake_driver.write(tmp_path / "driver", tmp_path / "state", "outside")
    link = stack.driver_files / f"link-{secrets.token_hex(4)}"
    link.symlink_to(outside)
    through_link, by_kubectl = driver_name(), driver_name()
    created = api.post(
        "/v3/nodedrivers", {"name": through_link, "active": True, "url": link.as_uri()}
    )
    assert created.status == 201, created.body  # `..`-free and below it, as far as text goes
    crs.create_cluster_custom_object(GROUP, VERSION, "nodedrivers", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeDriver",
        "metadata": {"name": by_kubectl},
        "spec": {"url": outside.as_uri(), "active": True, "builtin": False},
    })  # fmt: skip
    try:
        for name in (through_link, by_kubectl):
            downloaded = settled(api, name, "Downloaded", "False")
            assert downloaded["reason"] == "InvalidURL", downloaded
            body = api.get(f"/v3/nodedrivers/{name}").body
            assert body["state"] == "error" and not body["status"].get("digest"), body
        assert fake_driver.runs(tmp_path / "state") == []  # never run
    finally:
        for name in (through_link, by_kubectl):
            assert api.delete(f"/v3/nodedrivers/{name}").status in (204, 404)
        link.unlink()


def test_a_driver_url_port_is_1_to_65535(drivers: Callable[..., Response]) -> None:
    for port in ("99999", "0", "65536"):
        refused_field(drivers(name=driver_name(), url=f"https://example.com:{port}/d"), "url")
    accepted = drivers(name=driver_name(), url="https://example.com:65535/d", active=False)
    assert accepted.status == 201, accepted.body


# -- node drivers: what users see ---------------------------------------------------------------


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_download_errors_and_digests_are_shown_to_administrators_only(
    api: Api, stack: Environment, drivers: Callable[..., Response], make_user: Callable[..., Person]
) -> None:
    probing = driver_name()
    url = f"http://127.0.0.1:{closed_port()}/driver"
    assert drivers(name=probing, url=url).status == 201
    failed = settled(api, probing, "Downloaded", "False")
    assert failed["reason"] == "Unreachable" and url in failed["message"]
    fetched = driver_name()
    path = fake_driver.write(stack.driver_files / fetched, stack.root / f"{fetched}-state", "v")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert drivers(name=fetched, url=path.as_uri()).status == 201
    settled(api, fetched, "Ready", "True")
    assert api.get(f"/v3/nodedrivers/{fetched}").body["status"]["digest"] == digest
    why = api.get(f"/v3/nodedrivers/{probing}").body["transitioningMessage"]
    assert url in why

    user = make_user().api
    probed = user.get(f"/v3/nodedrivers/{probing}").body
    ready = user.get(f"/v3/nodedrivers/{fetched}").body
    everything = str([probed, ready, user.get("/v3/nodedrivers").body["data"]])
    assert digest not in everything and "Unreachable" not in everything
    assert url not in str(probed["status"]) and url not in probed["transitioningMessage"]
    assert "refused" not in everything.lower()
    assert (probed["state"], probed["transitioning"]) == ("error", "error")
    assert "administrators" in probed["transitioningMessage"]
    assert [c["type"] for c in probed["status"]["conditions"]] == ["Ready"]
    assert ready["state"] == "active" and ready["status"]["schema"]["fields"]
    # No filter matches on what the caller may not see.
    query = f"/v3/nodedrivers?transitioningMessage={urllib.parse.quote(why)}"
    assert user.get(query).body["data"] == []
    assert len(api.get(query).body["data"]) == 1

    # Another administrator sees what the admin sees.
    other_admin = make_user(admin=True).api
    assert other_admin.get(f"/v3/nodedrivers/{fetched}").body["status"]["digest"] == digest
    assert other_admin.get(f"/v3/nodedrivers/{probing}").body["transitioningMessage"] == why


# -- exec commands in the log -------------------------------------------------------------------


@pytest.fixture(scope="module")
def kwok_pod(api: Api, stack: Environment) -> tuple[str, str]:
    """A project of the simulated cluster and a running (kwok) pod of its workload."""
    project = create_project(api, stack.cluster_ids[0])["id"]
    created = create_namespace(api, stack.cluster_ids[0], project)
    assert created.status == 201, created.body
    body = {"name": unique("web"), "namespaceId": created.body["name"], "scale": 1,
            "containers": [{"name": "web", "image": "example/web:1"}]}  # fmt: skip
    workload = api.post(f"/v3/projects/{project}/workloads", body)
    assert workload.status == 201, workload.body
    pods = f"/v3/projects/{project}/pods?workloadId={workload.body['id']}"
    pod = wait_for("a running pod", lambda: [
        p for p in api.get(pods).body["data"] if p["state"] == "running"
    ], 30)[0]  # fmt: skip
    return project, str(pod["id"])


def test_an_exec_command_cannot_forge_or_break_log_lines(
    api: Api, stack: Environment, kwok_pod: tuple[str, str]
) -> None:
    project, pod = kwok_pod
    log = stack.root / "logs" / "apiserver.log"
    marker = secrets.token_hex(6)
    forged = f"exec: user u-{marker} runs rm -rf / in pod x/y container z of cluster c-forged"
    # NUL never gets this far: no body may hold one.
    with_nul = ["sh", "-c", f"true {marker}", f"nul\x00{marker}"]
    refused = api.post(f"/v3/projects/{project}/pods/{pod}?action=execute", {"command": with_nul})
    assert (refused.status, refused.body.get("fieldName")) == (422, "command[3]"), refused.body
    command = ["sh", "-c", f"true {marker}\n{forged}\r\n"]
    # kwok runs no command (the answer is ExecFailed); the audit line is written before.
    ran = api.post(f"/v3/projects/{project}/pods/{pod}?action=execute", {"command": command})
    assert ran.status in (200, 422), ran.body
    lines = wait_for("the exec audit line", lambda: [
        line for line in log.read_bytes().splitlines() if marker.encode() in line
    ], 10)  # fmt: skip
    assert len(lines) == 1, lines  # one line, not one per line break
    assert b"\x00" not in lines[0] and b"\r" not in lines[0]
    assert not any(line.startswith(forged.encode()) for line in log.read_bytes().splitlines())
    assert b'"true ' + marker.encode() + b"\\n" + forged.encode() in lines[0]


# -- WebSocket origin ---------------------------------------------------------------------------


def test_a_cookie_websocket_needs_corrals_origin_a_token_none(api: Api, stack: Environment) -> None:
    login = api.login("admin", stack.admin_password, responseType="cookie")
    assert login.status == 200, login.body
    cookie = f"R_SESS={login.cookies['R_SESS'].value}"
    # A watch: a WebSocket the simulated cluster serves itself.
    path = f"/k8s/clusters/{stack.cluster_ids[0]}/api/v1/namespaces?watch=true"
    refused = handshake(api, path, Cookie=cookie)
    assert refused[0] == 403 and b"PermissionDenied" in refused[1], refused
    assert handshake(api, path, Cookie=cookie, Origin=api.base)[0] == 101
    # kubectl sends a token and no Origin: corral passes it on. (The cluster's own watch
    # handler, golang.org/x/net/websocket, then wants an Origin itself; kubectl's exec does not.)
    passed = handshake(api, path, Authorization=f"Bearer {api.token}")
    assert b"PermissionDenied" not in passed[1] and b'"type":"error"' not in passed[1], passed
    assert handshake(api, path, Authorization=f"Bearer {api.token}", Origin=api.base)[0] == 101


# -- link-local and metadata addresses ----------------------------------------------------------


def test_an_s3_endpoint_at_a_metadata_address_is_refused_unless_a_setting_allows_it(
    api: Api,
    crs: k8s.CustomObjectsApi,
    clusters: Callable[[dict[str, Any]], Response],
    setting: Callable[[str, str], None],
) -> None:
    keys = {"accessKey": "AK", "secretKey": "never-shown-0123456789"}
    made = api.post("/v3/cloudcredentials", {"name": "reach", "s3credentialConfig": keys})
    assert made.status == 201, made.body
    setting("kubernetes-version-catalog", WITH_S3)
    for endpoint in ("169.254.169.254", "169.254.169.254:80", "metadata.google.internal",
                     "2852039166"):  # fmt: skip
        target = {"endpoint": endpoint, "bucket": "etcd", "cloudCredentialName": made.body["id"]}
        body = {"name": "reach",
                "rke2Config": {"kubernetesVersion": "v1.36.3", "etcd": {"s3": target}}}  # fmt: skip
        refused = refused_and_nothing_stored(crs, clusters, body)
        assert refused["fieldName"] == "rke2Config.etcd.s3.endpoint", refused
        assert LINK_LOCAL in refused["message"]
    setting(LINK_LOCAL, "true")
    created = clusters(body)  # deleted by the fixture
    assert created.status == 201, created.body
    assert api.delete(f"/v3/cloudcredentials/{made.body['id']}").status == 204


def test_an_oidc_issuer_at_a_metadata_address_is_refused_unless_a_setting_allows_it(
    api: Api, setting: Callable[[str, str], None]
) -> None:
    before = api.get("/v3/authConfigs/oidc").body
    for issuer in (
        "https://169.254.169.254/latest",
        "https://[fe80::1]:8443/r",
        "https://metadata.google.internal/x",
        "https://id.example.com:99999/r",
    ):
        refused_field(api.put("/v3/authConfigs/oidc", {"issuer": issuer}), "issuer")
    assert api.get("/v3/authConfigs/oidc").body["issuer"] == before["issuer"]
    setting(LINK_LOCAL, "true")
    allowed = api.put("/v3/authConfigs/oidc", {"issuer": "https://169.254.169.254/realms/a"})
    assert allowed.status == 200, allowed.body
    assert allowed.body["issuer"] == "https://169.254.169.254/realms/a"
