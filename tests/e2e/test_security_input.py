"""A hostile client's input (issue 21, item 4), through HTTP: a lone surrogate or NUL in any
string, quantities outside Kubernetes' grammar and corral's bound, wrong JSON types, control
and bidirectional characters in names. Each is a 422 naming the field, and nothing is stored."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment

from .api import Api, Response
from .test_projects import create_namespace, create_project, unique

# What a hostile client put in a string: JSON's `\ud800` (a lone surrogate) and `\u0000`.
UNSTORABLE = {"surrogate": "\ud800", "nul": "\x00"}
# Spoofing and terminal control in names: right-to-left override, isolate, escape, newline.
NAME_TRICKS = {"rlo": "\u202e", "isolate": "\u2066", "escape": "\x1b", "newline": "\n"}


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def apps(downstream: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(downstream)


@pytest.fixture(scope="module")
def place(api: Api, cluster: str) -> tuple[str, str]:
    """A project and one of its namespaces."""
    project = create_project(api, cluster)["id"]
    created = create_namespace(api, cluster, project)
    assert created.status == 201, created.body
    return project, created.body["name"]


@pytest.fixture
def cleanup(api: Api) -> Iterator[list[str]]:
    """Paths to delete afterwards: what the old code stored when it should have refused."""
    paths: list[str] = []
    yield paths
    for path in paths:
        api.delete(path)


def refused(response: Response, field: str | None, code: str = "InvalidFormat") -> None:
    assert response.status == 422, response.body
    body = response.body
    assert (body["type"], body["status"], body["code"]) == ("error", 422, code), body
    assert body.get("fieldName") == field, body


def ids(api: Api, path: str) -> set[str]:
    listed = api.get(path)
    assert listed.status == 200, listed.body
    return {o["id"] for o in listed.body["data"]}


def created_id(response: Response, path: str, cleanup: list[str]) -> None:
    """Registers what a create that should have been refused made, so it is removed."""
    if response.status == 201:
        cleanup.append(f"{path}/{response.body['id']}")


# -- a lone surrogate or NUL in any string ------------------------------------------------------


@pytest.mark.parametrize("char", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_a_lone_surrogate_or_nul_in_a_node_template_or_credential_is_422(
    api: Api, char: str, cleanup: list[str]
) -> None:
    for path, body, field in (
        ("/v3/nodetemplates", {"kwokConfig": {}, "description": f"fast{char}"}, "description"),
        ("/v3/nodetemplates", {"kwokConfig": {"cpu": f"2{char}"}}, "kwokConfig.cpu"),
        ("/v3/cloudcredentials", {"kwokcredentialConfig": {}, "name": f"cc{char}"}, "name"),
    ):
        before = ids(api, path)
        response = api.post(path, body)
        created_id(response, path, cleanup)
        refused(response, field)
        assert ids(api, path) == before


@pytest.mark.parametrize("char", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_a_lone_surrogate_or_nul_in_a_project_secret_is_422(
    api: Api, place: tuple[str, str], char: str, cleanup: list[str]
) -> None:
    project, _ = place
    path = f"/v3/projects/{project}/secrets"
    before = ids(api, path)
    response = api.post(path, {"name": unique("s"), "stringData": {"password": f"pw{char}"}})
    created_id(response, path, cleanup)
    refused(response, "stringData.password")
    assert ids(api, path) == before


@pytest.mark.parametrize("char", UNSTORABLE.values(), ids=UNSTORABLE.keys())
def test_a_lone_surrogate_or_nul_in_a_workload_image_is_422(
    api: Api, apps: k8s.AppsV1Api, place: tuple[str, str], char: str, cleanup: list[str]
) -> None:
    project, namespace = place
    name = unique("w")
    path = f"/v3/projects/{project}/workloads"
    response = api.post(path, {
        "workloadType": "deployment", "name": name, "namespaceId": namespace,
        "containers": [{"name": "app", "image": f"registry.example/app{char}:1"}],
    })  # fmt: skip
    created_id(response, path, cleanup)
    refused(response, "containers[0].image")
    assert name not in {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}


def test_nan_and_infinity_are_not_json(api: Api, cluster: str) -> None:
    before = ids(api, "/v3/projects")
    raw = b'{"name": "nan", "clusterId": "%s", "resourceQuota": {"limit": {"pods": NaN}}}'
    response = api.post(
        "/v3/projects", raw=raw % cluster.encode(), headers={"Content-Type": "application/json"}
    )
    refused(response, "resourceQuota.limit.pods", "InvalidFormat")
    assert ids(api, "/v3/projects") == before


# -- one quantity grammar and bound -------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"cpu": "1e999999"}, "kwokConfig.cpu"),
        ({"memory": "1" * 4000}, "kwokConfig.memory"),
        ({"memory": "8Gb"}, "kwokConfig.memory"),
        ({"cpu": "-1"}, "kwokConfig.cpu"),
        ({"pods": -5}, "kwokConfig.pods"),
        ({"pods": 2**62 * 4}, "kwokConfig.pods"),
    ],
)
def test_kwok_capacity_follows_the_grammar_and_bound_of_every_quantity(
    api: Api, config: dict[str, Any], field: str, cleanup: list[str]
) -> None:
    before = ids(api, "/v3/nodetemplates")
    response = api.post("/v3/nodetemplates", {"kwokConfig": config})
    created_id(response, "/v3/nodetemplates", cleanup)
    refused(response, field)
    assert ids(api, "/v3/nodetemplates") == before


def test_the_same_quantity_is_refused_alike_in_quotas_and_container_resources(
    api: Api, cluster: str, place: tuple[str, str], apps: k8s.AppsV1Api
) -> None:
    """One rule: what kwok capacity refuses, quotas and container resources refuse too, with
    the same message after the field's name."""
    messages = []
    kwok = api.post("/v3/nodetemplates", {"kwokConfig": {"memory": "1e999999"}})
    refused(kwok, "kwokConfig.memory")
    messages.append(kwok.body["message"].removeprefix("kwokConfig.memory"))
    quota = api.post("/v3/projects", {
        "name": unique("q"), "clusterId": cluster,
        "resourceQuota": {"limit": {"limitsMemory": "1e999999"}},
        "namespaceDefaultResourceQuota": {"limit": {"limitsMemory": "1Gi"}},
    })  # fmt: skip
    refused(quota, "resourceQuota.limit.limitsMemory")
    messages.append(quota.body["message"].removeprefix("resourceQuota.limit.limitsMemory"))
    project, namespace = place
    name = unique("w")
    workload = api.post(f"/v3/projects/{project}/workloads", {
        "workloadType": "deployment", "name": name, "namespaceId": namespace,
        "containers": [{"name": "app", "image": "registry.example/app:1",
                        "resources": {"limits": {"memory": "1e999999"}}}],
    })  # fmt: skip
    refused(workload, "containers[0].resources.limits.memory")
    messages.append(workload.body["message"].removeprefix("containers[0].resources.limits.memory"))
    assert len(set(messages)) == 1, messages
    assert name not in {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}


def test_a_kwok_capacity_given_as_a_number_is_a_quantity_as_in_quotas(
    api: Api, cleanup: list[str]
) -> None:
    created = api.post("/v3/nodetemplates", {"kwokConfig": {"cpu": 2, "pods": "50"}})
    assert created.status == 201, created.body
    cleanup.append(f"/v3/nodetemplates/{created.body['id']}")
    assert created.body["kwokConfig"] == {"cpu": 2, "memory": "8Gi", "pods": "50"}


# -- wrong JSON types ---------------------------------------------------------------------------


def test_a_workload_type_given_as_a_list_is_422_not_a_deployment(
    api: Api, apps: k8s.AppsV1Api, place: tuple[str, str], cleanup: list[str]
) -> None:
    project, namespace = place
    name = unique("w")
    path = f"/v3/projects/{project}/workloads"
    response = api.post(path, {
        "workloadType": [], "name": name, "namespaceId": namespace,
        "containers": [{"name": "app", "image": "registry.example/app:1"}],
    })  # fmt: skip
    created_id(response, path, cleanup)
    refused(response, "workloadType")
    assert name not in {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kwokConfig": {}, "nodeTaints": ""}, "nodeTaints"),
        ({"kwokConfig": {}, "nodeTaints": {}}, "nodeTaints"),
        ({"kwokConfig": ""}, "kwokConfig"),
        ({"kwokConfig": {}, "description": ["a"]}, "description"),
        ({"kwokConfig": {}, "name": False}, "name"),
    ],
)
def test_a_node_template_field_of_the_wrong_type_is_422_not_absent(
    api: Api, body: dict[str, Any], field: str, cleanup: list[str]
) -> None:
    before = ids(api, "/v3/nodetemplates")
    response = api.post("/v3/nodetemplates", body)
    created_id(response, "/v3/nodetemplates", cleanup)
    refused(response, field)
    assert ids(api, "/v3/nodetemplates") == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agentEnvVars": ""}, "agentEnvVars"),
        ({"localClusterAuthEndpoint": 0}, "localClusterAuthEndpoint"),
        ({"labels": ""}, "labels"),
        ({"clusterAgentDeploymentCustomization": []}, "clusterAgentDeploymentCustomization"),
        ({"importedConfig": {"kubeConfig": ["apiVersion: v1"]}}, "importedConfig.kubeConfig"),
    ],
)
def test_a_cluster_field_of_the_wrong_type_is_422_not_absent(
    api: Api, body: dict[str, Any], field: str, cleanup: list[str]
) -> None:
    before = ids(api, "/v3/clusters")
    response = api.post("/v3/clusters", {"name": unique("c"), **body})
    created_id(response, "/v3/clusters", cleanup)
    refused(response, field)
    assert ids(api, "/v3/clusters") == before


def test_a_login_response_type_given_as_a_list_is_422(
    api: Api, make_user: Callable[..., Any]
) -> None:
    person = make_user()
    response = api.login(person.username, person.password, responseType=["cookie"])
    refused(response, "responseType")


# -- names refuse control and bidirectional characters ------------------------------------------


@pytest.mark.parametrize("char", NAME_TRICKS.values(), ids=NAME_TRICKS.keys())
def test_names_refuse_control_and_bidirectional_characters(
    api: Api, cluster: str, char: str, cleanup: list[str]
) -> None:
    spoofed = f"invoice{char}txt.exe"
    for path, body, field in (
        ("/v3/projects", {"name": spoofed, "clusterId": cluster}, "name"),
        ("/v3/clusters", {"name": spoofed}, "name"),
        ("/v3/nodetemplates", {"kwokConfig": {}, "displayName": spoofed}, "displayName"),
        ("/v3/cloudcredentials", {"kwokcredentialConfig": {}, "name": spoofed}, "name"),
        ("/v3/users", {"username": f"u{secrets.token_hex(3)}{char}", "password": "x" * 16},
         "username"),
    ):  # fmt: skip
        before = ids(api, path)
        response = api.post(path, body)
        created_id(response, path, cleanup)
        refused(response, field)
        assert char not in response.body["message"]
        assert ids(api, path) == before


def test_descriptions_refuse_bidirectional_and_control_characters_but_keep_line_breaks(
    api: Api, cluster: str, cleanup: list[str]
) -> None:
    project = create_project(api, cluster, description="first line\n\tsecond line")
    cleanup.append(f"/v3/projects/{project['id']}")
    assert project["description"] == "first line\n\tsecond line"
    for char in ("\u202e", "\u200f", "\x07"):
        response = api.put(f"/v3/projects/{project['id']}", {"description": f"ok{char}"})
        refused(response, "description")
    shown = api.get(f"/v3/projects/{project['id']}").body
    assert shown["description"] == "first line\n\tsecond line"
    path = f"/v3/projects/{project['id']}/secrets"
    before = ids(api, path)
    body = {"name": unique("s"), "description": "x\u202ey", "stringData": {"k": "v"}}
    response = api.post(path, body)
    created_id(response, path, cleanup)
    refused(response, "description")
    assert ids(api, path) == before
