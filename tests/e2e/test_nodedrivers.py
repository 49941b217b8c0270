"""Node drivers through /v3 against the real stack: a driver served by a local HTTP server is
downloaded, checked against its checksum of each length and asked for its schema; a wrong
checksum or an unreachable url leaves it unusable with a clear condition and never runs it;
deactivation, activation, validation and who may change drivers."""

from __future__ import annotations

import hashlib
import http.server
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .. import fake_driver
from .api import Api
from .conftest import Person

READY_TIMEOUT = 30


@dataclass
class DriverServer:
    """Serves the files of `directory` on 127.0.0.1 and counts the requests for each."""

    directory: Path
    url: str = ""
    requests: dict[str, int] = field(default_factory=dict)

    def publish(self, name: str, variant: str) -> tuple[str, bytes, Path]:
        """A new test driver as /<name>: its url, its bytes and its state directory (where
        it records each run)."""
        state = self.directory.parent / f"state-{name}"
        body = fake_driver.script(state, variant)
        (self.directory / name).write_bytes(body)
        return f"{self.url}/{name}", body, state


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DriverServer]:
    root = tmp_path_factory.mktemp("drivers")
    served = DriverServer(root / "www")
    served.directory.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(served.directory), **kwargs)

        def do_GET(self) -> None:
            served.requests[self.path] = served.requests.get(self.path, 0) + 1
            super().do_GET()

        def log_message(self, *_: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def drivers(api: Api) -> Iterator[Callable[..., dict[str, Any]]]:
    """Creates drivers through /v3 and deletes them after the test."""
    made: list[str] = []

    def create(**body: Any) -> dict[str, Any]:
        created = api.post("/v3/nodedrivers", {"type": "nodeDriver", "active": True, **body})
        assert created.status == 201, created.body
        made.append(created.body["id"])
        return dict(created.body)

    yield create
    for name in made:
        assert api.delete(f"/v3/nodedrivers/{name}").status in (204, 404)


def unique() -> str:
    return f"fake{secrets.token_hex(4)}"


def condition(api: Api, name: str, type: str) -> dict[str, Any] | None:
    body = api.get(f"/v3/nodedrivers/{name}").body
    found = [c for c in body["status"].get("conditions") or [] if c["type"] == type]
    current = found and found[0].get("observedGeneration") == body["metadata"]["generation"]
    return found[0] if current else None


def settled(api: Api, name: str, type: str, status: str) -> dict[str, Any]:
    """The condition once it has this status for the driver's current generation."""
    return wait_for(
        f"node driver {name} {type}={status}",
        lambda: (c := condition(api, name, type)) and c["status"] == status and c,
        READY_TIMEOUT,
    )


def test_the_builtin_kwok_driver_is_active_with_its_schema(api: Api) -> None:
    kwok = settled(api, "kwok", "Ready", "True")
    assert kwok["reason"] == "Builtin"
    body = api.get("/v3/nodedrivers/kwok").body
    assert (body["builtin"], body["active"], body["state"], body["url"]) == (
        True, True, "active", "local://"
    )  # fmt: skip
    assert set(body["status"]["schema"]["fields"]) == {"cpu", "memory", "pods"}
    refused = api.delete("/v3/nodedrivers/kwok")
    assert refused.status == 405, refused.body
    assert api.put("/v3/nodedrivers/kwok", {"url": "https://example.com/x"}).status == 422
    assert api.get("/v3/nodedrivers/kwok").status == 200


@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha256", "sha512"])
def test_a_served_driver_with_the_right_checksum_becomes_ready_and_answers_schema(
    api: Api, server: DriverServer, drivers: Callable[..., dict[str, Any]],
    stack: Environment, crs: k8s.CustomObjectsApi, algorithm: str,
) -> None:  # fmt: skip
    name = unique()
    url, body, state = server.publish(f"corral-driver-{name}", algorithm)
    checksum = hashlib.new(algorithm, body).hexdigest()
    created = drivers(url=url, checksum=checksum, displayName=f"Fake {algorithm}")
    # Derived from the display name when no name is given.
    assert created["id"] == f"fake{algorithm}"
    assert created["checksum"] == checksum
    ready = settled(api, created["id"], "Ready", "True")
    assert ready["reason"] == "Ready"
    shown = api.get(f"/v3/nodedrivers/{created['id']}").body
    assert shown["state"] == "active"
    digest = hashlib.sha256(body).hexdigest()
    assert shown["status"]["digest"] == digest
    assert (stack.root / "operator" / "drivers" / digest).read_bytes() == body
    assert shown["status"]["schema"]["fields"]["region"]["required"] is True
    assert [run["command"] for run in fake_driver.runs(state)] == ["schema"]
    # One writer of the status: the driver reconciler's own field manager.
    stored = crs.get_cluster_custom_object("management.svc.io", "v3", "nodedrivers", created["id"])
    writers = {
        (entry["manager"], entry["operation"])
        for entry in stored["metadata"]["managedFields"]
        if entry.get("subresource") == "status"
    }
    assert writers == {("corral-nodedrivers", "Apply")}


@pytest.mark.parametrize(
    ("how", "reason"), [("wrong checksum", "ChecksumMismatch"), ("unreachable", "Unreachable")]
)
def test_a_driver_that_cannot_be_fetched_stays_unusable_and_never_runs(
    api: Api, server: DriverServer, drivers: Callable[..., dict[str, Any]], how: str, reason: str
) -> None:
    name = unique()
    url, body, state = server.publish(name, how)
    checksum = hashlib.sha256(body + b"\n").hexdigest()
    if how == "unreachable":
        url, checksum = url.replace(server.url, "http://127.0.0.1:9"), ""
    created = drivers(name=name, url=url, checksum=checksum)
    downloaded = settled(api, name, "Downloaded", "False")
    assert downloaded["reason"] == reason
    assert ("sha256" in downloaded["message"]) == (how == "wrong checksum")
    ready = settled(api, name, "Ready", "False")
    assert (ready["reason"], ready["message"]) == (reason, downloaded["message"])
    assert settled(api, name, "Installed", "False")["reason"] == "NotDownloaded"
    shown = api.get(f"/v3/nodedrivers/{created['id']}").body
    assert (shown["state"], shown["transitioning"]) == ("error", "error")
    assert "digest" not in shown["status"] and "schema" not in shown["status"]
    assert fake_driver.runs(state) == []


def test_deactivate_and_activate(
    api: Api, server: DriverServer, drivers: Callable[..., dict[str, Any]], stack: Environment
) -> None:
    name = unique()
    url, body, state = server.publish(name, "toggle")
    drivers(name=name, url=url, checksum=hashlib.sha256(body).hexdigest())
    settled(api, name, "Ready", "True")
    deactivated = api.post(f"/v3/nodedrivers/{name}?action=deactivate")
    assert deactivated.status == 200, deactivated.body
    assert (deactivated.body["active"], deactivated.body["state"]) == (False, "inactive")
    assert "activate" in deactivated.body["actions"]
    assert settled(api, name, "Ready", "False")["reason"] == "Inactive"
    # The cached file stays: activating again checks it and does not fetch it again.
    digest = hashlib.sha256(body).hexdigest()
    assert (stack.root / "operator" / "drivers" / digest).exists()
    fetched = server.requests[f"/{name}"]
    activated = api.post(f"/v3/nodedrivers/{name}?action=activate")
    assert activated.status == 200 and activated.body["active"] is True
    settled(api, name, "Ready", "True")
    assert settled(api, name, "Downloaded", "True")["reason"] == "Cached"
    assert server.requests[f"/{name}"] == fetched
    # Its schema was read once, when first installed.
    assert [run["command"] for run in fake_driver.runs(state)] == ["schema"]


def test_bad_fields_are_refused_naming_them_and_nothing_is_stored(api: Api) -> None:
    name = unique()
    good = {"type": "nodeDriver", "name": name, "active": False, "url": "https://example.com/d"}
    for change, field_name in [
        ({"displayName": "x" * 58}, "displayName"),
        ({"checksum": "ab" * 20 + "a"}, "checksum"),
        ({"url": "ftp://example.com/d"}, "url"),
        ({"url": ""}, "url"),
        ({"url": "https://user:secret@example.com/d"}, "url"),
        ({"name": "Not-A-Name"}, "name"),
        ({"active": "yes"}, "active"),
    ]:
        refused = api.post("/v3/nodedrivers", {**good, **change})
        assert refused.status == 422, (change, refused.body)
        assert refused.body["fieldName"] == field_name and refused.body["type"] == "error"
    assert api.get(f"/v3/nodedrivers/{name}").status == 404
    made = api.post("/v3/nodedrivers", {**good, "displayName": "x" * 57})
    assert made.status == 201, made.body
    assert api.post("/v3/nodedrivers", good).status == 409
    refused = api.put(f"/v3/nodedrivers/{name}", {"displayName": "y" * 58})
    assert refused.status == 422 and refused.body["fieldName"] == "displayName"
    assert api.get(f"/v3/nodedrivers/{name}").body["displayName"] == "x" * 57
    assert api.delete(f"/v3/nodedrivers/{name}").status == 204
    wait_for("the driver gone", lambda: api.get(f"/v3/nodedrivers/{name}").status == 404, 10)


def test_everyone_reads_drivers_only_admins_change_them(
    api: Api, make_user: Callable[..., Person], drivers: Callable[..., dict[str, Any]]
) -> None:
    name = unique()
    drivers(name=name, url="https://example.com/driver", active=False, description="before")
    person = make_user()
    listed = person.api.get("/v3/nodedrivers")
    assert listed.status == 200 and {"kwok", name} <= {d["id"] for d in listed.body["data"]}
    assert listed.body["createTypes"] == {}
    shown = person.api.get(f"/v3/nodedrivers/{name}")
    assert shown.status == 200 and shown.body["actions"] == {}
    assert "update" not in shown.body["links"] and "remove" not in shown.body["links"]
    for refused in [
        person.api.post("/v3/nodedrivers", {"name": unique(), "url": "https://e.com/d",
                                             "active": True}),
        person.api.put(f"/v3/nodedrivers/{name}", {"description": "after"}),
        person.api.post(f"/v3/nodedrivers/{name}?action=activate"),
        person.api.delete(f"/v3/nodedrivers/{name}"),
    ]:  # fmt: skip
        assert refused.status == 403, refused.body
    body = api.get(f"/v3/nodedrivers/{name}").body
    assert (body["description"], body["active"]) == ("before", False)


@pytest.mark.parametrize(
    "spec",
    [{"url": "ftp://example.com/d"}, {"displayName": "x" * 58}, {"checksum": "abc"},
     {"url": "local://", "builtin": False}, {"url": "https://example.com/d", "builtin": True}],
)  # fmt: skip
def test_kubectl_writes_are_held_to_the_same_rules(
    crs: k8s.CustomObjectsApi, spec: dict[str, Any]
) -> None:
    body = {
        "apiVersion": "management.svc.io/v3",
        "kind": "NodeDriver",
        "metadata": {"name": unique()},
        "spec": {"url": "https://example.com/d", "active": False, **spec},
    }
    with pytest.raises(ApiException) as caught:
        crs.create_cluster_custom_object("management.svc.io", "v3", "nodedrivers", body)
    assert caught.value.status == 422, caught.value.body
