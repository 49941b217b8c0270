"""Parsers of cluster and node input, and the observer's failure reporting (issue 9): taints,
kubeconfigs, cluster bodies, a server that is not Kubernetes, one failing sync among many."""

from __future__ import annotations

import base64
import contextlib
import datetime
import functools
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.apiserver.http.errors import from_core
from corral.apiserver.services.clusterspec import driver_of
from corral.core.api import names
from corral.core.clusters import importing, observe, taints
from corral.core.clusters.credential import Credential
from corral.core.errors import CorralError
from corral.core.kube import agent, kinds
from corral.core.kube.informer import Informer
from corral.core.kube.status import StatusWriter
from corral.operator.downstream import drain, nodes
from corral.operator.downstream.agent import Agent
from corral.operator.drivers.cache import Cache
from corral.operator.drivers.registry import Drivers
from corral.operator.state import BY_CLUSTER, State

from .test_clusters import b64
from .test_clusters import config as kubeconfig

CRD = Path(__file__).resolve().parents[2] / "crds" / "management.svc.io_nodes.yaml"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
key_text = st.text(alphabet="aZ09-_./! ", max_size=80) | st.builds(
    lambda prefix, name: f"{prefix}/{name}",
    st.text(alphabet="az09-.", min_size=1, max_size=300),
    st.text(alphabet="aZ09-_.", min_size=1, max_size=70),
)
taint_like = st.fixed_dictionaries(
    {},
    optional={
        "key": key_text | json_values,
        "value": st.text(alphabet="aZ09-_. ", max_size=70) | json_values,
        "effect": st.sampled_from([*taints.EFFECTS, "Sometimes", ""]) | json_values,
    },
)


# -- taints -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=1000)
@given(st.lists(taint_like, max_size=6) | json_values)
def test_any_taint_list_is_canonical_or_refused_with_a_reason(value: Any) -> None:
    try:
        parsed = taints.parse(value)
    except taints.InvalidTaint as exc:
        assert str(exc).startswith("desiredNodeTaints")
        return
    assert isinstance(value, list) and len(parsed) == len(value) <= taints.MAX_TAINTS
    for taint in parsed:
        assert set(taint) <= {"key", "value", "effect"} and taint["effect"] in taints.EFFECTS
        assert all(isinstance(v, str) for v in taint.values())
    assert len({(t["key"], t["effect"]) for t in parsed}) == len(parsed)


@functools.cache
def crd_rules() -> tuple[re.Pattern[str], re.Pattern[str], int, int]:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    item = schema["properties"]["spec"]["properties"]["desiredNodeTaints"]["items"]["properties"]
    key, value = item["key"], item["value"]
    return (re.compile(key["pattern"]), re.compile(value["pattern"]), key["maxLength"],
            value["maxLength"])  # fmt: skip


@settings(max_examples=300, deadline=1000)
@given(key_text, st.text(alphabet="aZ09-_. ", max_size=70))
def test_the_crd_schema_and_the_api_agree_on_keys_and_values(key: str, value: str) -> None:
    key_pattern, value_pattern, key_max, value_max = crd_rules()
    crd_accepts = (
        0 < len(key) <= key_max
        and key_pattern.search(key) is not None
        and key.find("/") <= 253  # the CEL rule
        and len(value) <= value_max
        and value_pattern.search(value) is not None
    )
    try:
        taints.parse([{"key": key, "value": value, "effect": "NoSchedule"}])
    except taints.InvalidTaint:
        assert not crd_accepts
    else:
        assert crd_accepts


@pytest.mark.parametrize(
    ("taint", "message"),
    [
        ({"key": "k", "value": {"a": 1}, "effect": "NoSchedule"}, "value must be text"),
        ({"key": "bad key!", "effect": "NoSchedule"}, "the name must be"),
        ({"key": "/k", "effect": "NoSchedule"}, "prefix before '/'"),
        ({"key": "Ex.com/k", "effect": "NoSchedule"}, "DNS subdomain"),
        ({"key": "a" * 254 + "/k", "effect": "NoSchedule"}, "DNS subdomain"),
        ({"key": "k" * 64, "effect": "NoSchedule"}, "the name must be"),
        ({"key": "k", "value": "v" * 64, "effect": "NoSchedule"}, "value must be empty"),
        ({"key": "k", "effect": "Sometimes"}, "effect must be one of"),
        ({"effect": "NoSchedule"}, "key is required"),
        ("k=v:NoSchedule", "must be an object"),
    ],
)
def test_taints_kubernetes_refuses_are_refused(taint: Any, message: str) -> None:
    with pytest.raises(taints.InvalidTaint, match=message):
        taints.parse([taint])


def test_good_taints_come_out_canonical_and_bounded() -> None:
    parsed = taints.parse(
        [
            {"key": "example.com/gpu", "value": "", "effect": "NoSchedule", "type": "taint"},
            {"key": "dedicated", "value": "db_1.a", "effect": "NoExecute"},
            {"key": "dedicated", "effect": "NoSchedule"},
        ]
    )
    assert parsed == [
        {"key": "example.com/gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "effect": "NoExecute", "value": "db_1.a"},
        {"key": "dedicated", "effect": "NoSchedule"},
    ]
    with pytest.raises(taints.InvalidTaint, match="unique by key and effect"):
        taints.parse([{"key": "k", "effect": "NoSchedule"}] * 2)
    with pytest.raises(taints.InvalidTaint, match="more than 64"):
        taints.parse([{"key": f"k{i}", "effect": "NoSchedule"} for i in range(65)])


def test_desired_taints_never_repeat_one_kubernetes_already_set() -> None:
    current = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    desired = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "mine", "effect": "NoSchedule"},
    ]
    assert observe.desired_taints(current, desired) == [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "mine", "effect": "NoSchedule"},
    ]


# -- kubeconfigs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoded", "message"),
    [
        (b64(kubeconfig({"server": "https://h:99999"}, {"token": "t"})), "not a valid URL"),
        (b64(kubeconfig({"server": "https://[::1"}, {"token": "t"})), "not a valid URL"),
        (b64(kubeconfig({"server": "https://h:0"}, {"token": "t"})), "https://host"),
        (b64(kubeconfig({"server": "https://u:p@h"}, {"token": "t"})), "https://host"),
        (b64(kubeconfig({"server": "https://h\r\nX: y"}, {"token": "t"})), "https:// URL"),
        (b64(kubeconfig({"server": 6443}, {"token": "t"})), "https:// URL"),
        (b64(kubeconfig({"server": "https://h"}, {"token": "t\r\nX-Y: z"})), "token must be"),
        (b64(kubeconfig({"server": "https://h"}, {"token": 12})), "token must be"),
        (
            b64(
                kubeconfig({"server": "https://h", "certificate-authority-data": 5}, {"token": "t"})
            ),
            "not valid base64",
        ),
        (
            b64(kubeconfig({"server": "https://h"}, {"token": "t"}, **{"current-context": ["c"]})),
            "no current-context",
        ),
        (base64.b64encode(b"[" * 190_000).decode(), "nested deeper than 32"),
        (base64.b64encode(b"- " * 60_000).decode(), "nested deeper than 32"),
    ],
)
def test_kubeconfigs_that_used_to_be_500s_are_refused(encoded: str, message: str) -> None:
    with pytest.raises(importing.ImportFailed, match=message):
        importing.parse_kubeconfig(encoded)


def test_a_context_naming_a_list_is_refused() -> None:
    config = kubeconfig({"server": "https://h"}, {"token": "t"})
    config["contexts"][0]["context"] = {"cluster": ["c"], "user": {"u": 1}}
    with pytest.raises(importing.ImportFailed, match="not defined"):
        importing.parse_kubeconfig(b64(config))


@settings(max_examples=100, deadline=2000)
@given(json_values, json_values, json_values)
def test_any_kubeconfig_is_a_credential_or_refused(server: Any, token: Any, ca: Any) -> None:
    for cluster, user in (
        ({"server": server, "certificate-authority-data": ca}, {"token": token}),
        (server, token),
    ):
        try:
            credential = importing.parse_kubeconfig(b64(kubeconfig(cluster, user)))
        except importing.ImportFailed:
            continue
        assert credential.server.startswith("https://")
        assert credential.token is None or "\n" not in credential.token


@settings(max_examples=100, deadline=2000)
@given(st.binary(max_size=2048))
def test_any_bytes_are_a_kubeconfig_or_refused(raw: bytes) -> None:
    began = time.monotonic()
    with contextlib.suppress(importing.ImportFailed):
        importing.parse_kubeconfig(base64.b64encode(raw).decode())
    assert time.monotonic() - began < 1


# -- cluster bodies -------------------------------------------------------------------------


@settings(max_examples=300, deadline=1000)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "importedConfig": json_values,
            "kubeConfig": json_values,
            "rke2Config": json_values,
            "driver": st.sampled_from(["imported", "rke2", "local", "floppy"]) | json_values,
        },
    )
)
def test_any_cluster_body_has_one_driver_or_is_422(body: dict[str, Any]) -> None:
    try:
        driver = driver_of(body)
    except CorralError as error:
        assert from_core(error).status == 422
        return
    assert driver in ("imported", "rke2")
    for name in ("importedConfig", "rke2Config"):
        assert body.get(name) is None or isinstance(body[name], dict)


@pytest.mark.parametrize("value", ["a kubeconfig", ["a"], 5, True])
def test_imported_config_must_be_an_object(value: Any) -> None:
    with pytest.raises(CorralError) as refused:
        driver_of({"importedConfig": value})
    error = from_core(refused.value)
    assert (error.status, error.field_name) == (422, "importedConfig")


# -- a server that is not Kubernetes --------------------------------------------------------


@pytest.fixture
async def garbage() -> AsyncIterator[str]:
    """Garbage labelled as JSON; under /redirect a redirect, under /401 and /500 those."""

    async def answer(request: web.Request) -> web.Response:
        prefix = request.path.split("/")[1]
        status = {"redirect": 302, "401": 401, "500": 500}.get(prefix, 200)
        headers = {"Location": "http://127.0.0.1:1/"} if status == 302 else {}
        body = b'{"gitVersion": <<'
        return web.Response(
            status=status, body=body, content_type="application/json", headers=headers
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield f"http://127.0.0.1:{server.port}"
    await server.close()


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        ("", "ClusterUnavailable", "does not answer as a Kubernetes"),
        ("/redirect", "ClusterUnavailable", "does not answer as a Kubernetes"),
        ("/500", "ClusterUnavailable", "answered HTTP 500"),
        ("/401", "Unauthorized", "refused the credentials"),
    ],
)
async def test_a_server_answering_garbage_is_not_kubernetes(
    garbage: str, path: str, code: str, message: str
) -> None:
    with pytest.raises(importing.ImportFailed, match=message) as refused:
        await agent.version(Credential(server=garbage + path, token="t"))
    assert refused.value.code == code


async def test_unusable_certificates_are_refused_before_connecting() -> None:
    for ca in (b"\xff\xfe", b"not a certificate"):
        with pytest.raises(importing.ImportFailed, match="certificates cannot be used"):
            await agent.version(Credential(server="https://127.0.0.1:1", ca_cert=ca))


# -- one failing sync among many --------------------------------------------------------------


NOW = datetime.datetime(2026, 2, 3, 4, 5, 6, tzinfo=datetime.UTC)


class FakeKube:
    """The status writes the node mirror makes in the management cluster, recorded."""

    def __init__(self) -> None:
        self.status: dict[str, dict[str, Any]] = {}

    async def patch(self, _: Any, name: str, body: dict[str, Any], **__: Any) -> dict[str, Any]:
        self.status[name] = body["status"]
        return {"metadata": body["metadata"], "status": body["status"]}


def mirror(kube: FakeKube, records: list[dict[str, Any]]) -> nodes.NodeMirror:
    def namespace(obj: dict[str, Any]) -> list[str]:
        return [obj["metadata"]["namespace"]]

    informer = Informer(kube, kinds.Node, {BY_CLUSTER: namespace})  # type: ignore[arg-type]
    for one in records:
        informer.put(one)
    writer = StatusWriter(kube, nodes.FIELD_MANAGER, lambda: NOW)  # type: ignore[arg-type]
    drains = drain.Drains("c-x", informer, writer)
    return nodes.NodeMirror("c-x", kube, informer, writer, drains)  # type: ignore[arg-type]


class FakeDownstream:
    """A cluster that refuses any change of one node."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.patched: list[str] = []

    async def patch(self, _: Any, name: str, body: dict[str, Any], **__: Any) -> dict[str, Any]:
        if name == self.refused:
            raise RuntimeError("admission webhook denied the request")
        self.patched.append(name)
        return {"metadata": {"name": name}, "spec": body["spec"]}


def record(node: str, desired: list[dict[str, Any]]) -> dict[str, Any]:
    name = names.node_cr_name(node)
    spec = {"requestedHostname": node, "desiredNodeTaints": desired}
    return {"metadata": {"name": name, "namespace": "c-x", "generation": 1}, "spec": spec}


async def test_one_node_that_fails_is_reported_and_the_others_are_applied() -> None:
    taint = [{"key": "k", "effect": "NoSchedule"}]
    kube = FakeKube()
    records = [record("a", taint), record("b", taint), record("c", [{"key": "bad key!"}])]
    downstream = FakeDownstream("a")
    node_list = [{"metadata": {"name": n}, "spec": {}, "status": {}} for n in ("a", "b", "c")]
    failures = await mirror(kube, records).sync(downstream, node_list, {})  # type: ignore[arg-type]
    assert set(failures) == {"a", "c"}
    assert "denied" in failures["a"] and "the name must be" in failures["c"]
    assert downstream.patched == ["b"]
    updated = {
        name: next(c for c in status["conditions"] if c["type"] == "Updated")
        for name, status in kube.status.items()
    }
    assert updated[names.node_cr_name("a")]["reason"] == "ApplyFailed"
    assert updated[names.node_cr_name("c")]["reason"] == "ApplyFailed"
    assert updated[names.node_cr_name("b")]["reason"] == "Applied"


def test_failed_syncs_turn_the_clusters_updated_false_and_name_them() -> None:
    probe = observe.Probe(True, True)
    failures = {"node n1": "Forbidden: denied", "projects": "boom"}
    found = {c.type: c for c in observe.cluster_conditions("imported", True, probe, [], failures)}
    assert (found["Updated"].status, found["Updated"].reason) == ("False", "SyncFailed")
    assert found["Updated"].message == "node n1: Forbidden: denied; projects: boom"
    assert found["Ready"].status == "True"
    healthy = {c.type: c for c in observe.cluster_conditions("imported", True, probe, [], {})}
    assert (healthy["Updated"].status, healthy["Updated"].reason) == ("True", "Applied")
    lost = {c.type: c for c in observe.cluster_conditions("imported", False, None, [], failures)}
    assert lost["Updated"].reason == "SyncFailed"


def test_a_failure_message_is_bounded_and_names_no_request() -> None:
    message = nodes.describe(RuntimeError("x" * 10_000))
    assert len(message) <= nodes.MAX_FAILURE and message.startswith("RuntimeError: ")


class FailingProjects:
    """A project sync that fails, as one might while its cluster is half set up."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, *_: Any) -> None:
        self.runs += 1
        raise RuntimeError("projects broke")

    def conflicts_retry_in(self) -> float | None:
        return None  # it never got as far as copying a secret


class StatusKube:
    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    async def patch(self, _: Any, __: str, body: dict[str, Any], **___: Any) -> dict[str, Any]:
        self.written.append(body["status"])
        return {"metadata": body["metadata"], "status": body["status"]}


async def test_the_agent_reports_failed_syncs_and_runs_the_others() -> None:
    kube, projects = StatusKube(), FailingProjects()
    state = State(kube, lambda: NOW)  # type: ignore[arg-type]
    body = {"metadata": {"name": "c-x", "generation": 1}, "spec": {"driver": "imported"},
            "status": {}}  # fmt: skip
    state.clusters.put(body)
    cluster_agent = Agent("c-x", state, Drivers(kube, Cache(Path("/nonexistent"))))  # type: ignore[arg-type]
    cluster_agent.projects = projects  # type: ignore[assignment]

    async def nodes_broke() -> None:
        raise RuntimeError("nodes broke")

    await cluster_agent._attempt("nodes", nodes_broke())
    await cluster_agent._sync_projects(None, None, ready=False, cluster_spec=body["spec"])
    await cluster_agent._write_status(body)
    assert projects.runs == 1
    updated = next(c for c in kube.written[-1]["conditions"] if c["type"] == "Updated")
    assert (updated["status"], updated["reason"]) == ("False", "SyncFailed")
    assert updated["message"] == (
        "nodes: RuntimeError: nodes broke; projects: RuntimeError: projects broke"
    )
    assert set(cluster_agent.failures.current) == {"nodes", "projects"}


def test_a_taint_with_a_key_corral_does_not_write_is_refused_naming_it() -> None:
    with pytest.raises(taints.InvalidTaint) as refused:
        taints.parse([{"key": "a", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}])
    assert (refused.value.field, refused.value.code) == (
        "desiredNodeTaints[0].timeAdded",
        "InvalidBodyContent",
    )
