"""Projects against a hostile or careless client (issue 9): quantities with huge exponents,
concurrent quota changes and namespace admissions across two API server replicas, identical
grants and users sent together, and a creator reading their project at once."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api, Response
from .conftest import Person, new_person

GROUP, VERSION = "management.svc.io", "v3"
ANNOTATION = "field.svc.io/projectId"
QUOTA = {
    "resourceQuota": {"limit": {"pods": "10", "limitsMemory": "4Gi"}},
    "namespaceDefaultResourceQuota": {"limit": {"pods": "5", "limitsMemory": "1Gi"}},
}


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def core(downstream: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(downstream)


def together(*calls: Callable[[], Response]) -> list[Response]:
    """Sends the requests at the same moment, each from its own thread."""
    start = threading.Barrier(len(calls))

    def run(call: Callable[[], Response]) -> Response:
        start.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def new_project(api: Api, cluster: str, **fields: Any) -> str:
    created = api.post("/v3/projects", {"name": unique("sec"), "clusterId": cluster, **fields})
    assert created.status == 201, created.body
    return str(created.body["id"])


def stored(crs: k8s.CustomObjectsApi, project: str) -> dict[str, Any]:
    cluster, _, name = project.partition(":")
    spec: dict[str, Any] = crs.get_namespaced_custom_object(
        GROUP, VERSION, cluster, "projects", name
    )["spec"]
    return spec


def on_replica(replica: Api, path: str) -> None:
    """What the first replica just made, once the second has it: it reads its own watch
    cache, which learns of it an instant later (until then it answers 404)."""
    wait_for(f"{path} on the second replica", lambda: replica.get(path).status == 200, 10)


def new_namespace(api: Api, cluster: str, project: str) -> Response:
    body = {"type": "namespace", "name": unique("ns"), "projectId": project}
    return api.post(f"/v3/clusters/{cluster}/namespaces", body)


# -- quantities ---------------------------------------------------------------------------------


def test_huge_exponents_are_refused_at_once_while_others_are_served(
    api: Api, replica: Api, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    project = new_project(api, cluster, **QUOTA)
    before = stored(crs, project)
    huge = {"pods": "1e999999", "limitsMemory": "4Gi"}
    bad: list[tuple[Callable[[], Response], str]] = [
        (lambda: api.post("/v3/projects", {"name": "x", "clusterId": cluster,
                                           "resourceQuota": {"limit": huge},
                                           "namespaceDefaultResourceQuota": {"limit": huge}}),
         "resourceQuota.limit.pods"),
        (lambda: api.put(f"/v3/projects/{project}", {"resourceQuota": {"limit": huge}}),
         "resourceQuota.limit.pods"),
        (lambda: api.put(f"/v3/projects/{project}",
                         {"containerDefaultResourceLimit": {"limitsMemory": "9e99999999"}}),
         "containerDefaultResourceLimit.limitsMemory"),
        (lambda: api.put(f"/v3/projects/{project}",
                         {"namespaceDefaultResourceQuota": {"limit": {"pods": "1e400"}}}),
         "namespaceDefaultResourceQuota.limit.pods"),
    ]  # fmt: skip
    answers = together(*(call for call, _ in bad), lambda: replica.get("/v3/settings"),
                       lambda: api.get("/v3/settings"))  # fmt: skip
    for (_, field), refused in zip(bad, answers, strict=False):
        assert (refused.status, refused.body["code"], refused.body["fieldName"]) == (
            422, "InvalidFormat", field,
        ), refused.body  # fmt: skip
    assert [a.status for a in answers[len(bad) :]] == [200, 200]
    assert stored(crs, project) == before


def test_bounds_follow_kubernetes_grammar(api: Api, cluster: str) -> None:
    project = new_project(api, cluster, **QUOTA)
    for value, status in (("9223372036854775807", 200), ("9223372036854775808", 422),
                          ("8Ei", 422), ("1E19", 422), ("1e3", 200), ("1e", 422),
                          (" 10", 422), ("7Ei", 200)):  # fmt: skip
        body = {"resourceQuota": {"limit": {"pods": value, "limitsMemory": "4Gi"}}}
        answer = api.put(f"/v3/projects/{project}", body)
        assert answer.status == status, (value, answer.body)


def test_usage_answers_when_stored_quantities_exceed_the_bound(
    api: Api, cluster: str, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    project = new_project(api, cluster, **QUOTA)
    namespace = new_namespace(api, cluster, project)
    assert namespace.status == 201, namespace.body
    # Written with kubectl (or by an older corral): the CRD's grammar admits it, the API's
    # bound would not.
    cluster_id, _, name = project.partition(":")
    crs.patch_namespaced_custom_object(GROUP, VERSION, cluster_id, "projects", name, {"spec": {
        "resourceQuota": {"limit": {"pods": "10", "limitsMemory": "1e5000"}},
        "namespaceDefaultResourceQuota": {"limit": {"pods": "5", "limitsMemory": "1e5000"}},
    }})  # fmt: skip
    ns = namespace.body["name"]
    # Kubernetes keeps it, in its canonical form.
    wait_for(
        "the huge quota downstream",
        lambda: (
            (core.read_namespaced_resource_quota("corral-project-quota", ns).status.hard or {}).get(
                "limits.memory"
            )
            == "100e4998"
        ),
        30,
    )

    # /v3 sums the quotas of its watch cache, which may not have this status yet.
    def bounded() -> bool:
        usage = api.get(f"/v3/projects/{project}?include=usage")
        assert usage.status == 200, usage.body
        return bool(usage.body["usage"]["hard"].get("limitsMemory") == str(2**63 - 1))

    wait_for("the huge quota bounded in /v3's usage", bounded, 30)
    # Checks against the stored values still work: the largest quantity is no limit, so one
    # more namespace fits, and then the pods are full.
    assert new_namespace(api, cluster, project).status == 201
    full = new_namespace(api, cluster, project)
    assert (full.status, full.body["fieldName"]) == (422, "pods"), full.body


# -- concurrent writers -------------------------------------------------------------------------


def test_concurrent_changes_to_one_project_all_land(
    api: Api, replica: Api, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    project = new_project(api, cluster, **QUOTA)
    path = f"/v3/projects/{project}"
    on_replica(replica, path)
    for round_ in range(8):
        cpu, pods, text = f"{100 + round_}m", str(20 + round_), f"round {round_}"
        limit = {"resourceQuota": {"limit": {"pods": pods, "limitsMemory": "4Gi"}}}
        answers = together(
            lambda c=cpu: api.put(path, {"containerDefaultResourceLimit": {"limitsCpu": c}}),
            lambda q=limit: replica.put(path, q),
            lambda t=text: replica.put(path, {"description": t}),
        )
        assert all(a.status in (200, 409) for a in answers), [a.body for a in answers]
        spec = stored(crs, project)
        landed = [
            spec.get("containerDefaultResourceLimit", {}).get("limitsCpu") == cpu,
            spec["resourceQuota"]["limit"] == {"pods": pods, "limitsMemory": "4Gi"},
            spec.get("description") == text,
        ]
        # Each change is stored exactly when its request said so.
        assert landed == [a.status == 200 for a in answers], (round_, spec)
        assert spec["namespaceDefaultResourceQuota"] == QUOTA["namespaceDefaultResourceQuota"]


def members(core: k8s.CoreV1Api, project: str) -> int:
    return sum(
        (n.metadata.annotations or {}).get(ANNOTATION) == project
        for n in core.list_namespace().items
    )


def test_a_limit_lowered_while_namespaces_arrive_never_leaves_the_project_over_quota(
    api: Api, replica: Api, cluster: str, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    lower = {"resourceQuota": {"limit": {"pods": "5", "limitsMemory": "4Gi"}}}
    for _ in range(4):
        project = new_project(api, cluster, **QUOTA)  # room for two namespaces of 5 pods
        on_replica(replica, f"/v3/projects/{project}")
        assert new_namespace(api, cluster, project).status == 201
        answers = together(
            lambda p=project: replica.put(f"/v3/projects/{p}", lower),
            lambda p=project: new_namespace(api, cluster, p),
        )
        statuses = {a.status for a in answers}
        assert statuses <= {200, 201, 409, 422} and not {200, 201} <= statuses, [
            a.body for a in answers
        ]
        limit = int(stored(crs, project)["resourceQuota"]["limit"]["pods"])
        assert members(core, project) * 5 <= limit


def test_two_namespaces_cannot_both_take_the_last_room(
    api: Api, replica: Api, cluster: str, core: k8s.CoreV1Api
) -> None:
    for _ in range(4):
        project = new_project(api, cluster, **QUOTA)
        on_replica(replica, f"/v3/projects/{project}")
        assert new_namespace(api, cluster, project).status == 201
        answers = together(
            lambda p=project: new_namespace(api, cluster, p),
            lambda p=project: new_namespace(replica, cluster, p),
        )
        assert [a.status for a in answers].count(201) <= 1, [a.body for a in answers]
        assert members(core, project) <= 2


# -- uniqueness ---------------------------------------------------------------------------------


def test_identical_grants_sent_together_make_one_binding(
    api: Api, replica: Api, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    project = new_project(api, cluster)
    person = new_person(api)
    on_replica(replica, f"/v3/projects/{project}")
    on_replica(replica, f"/v3/users/{person.id}")
    grant = {"projectId": project, "userId": person.id, "roleTemplateId": "read-only"}
    answers = together(*(
        lambda a=a: a.post("/v3/projectroletemplatebindings", grant)
        for a in [api, replica] * 5
    ))  # fmt: skip
    assert sorted(a.status for a in answers) == [201] + [409] * 9, [a.body for a in answers]
    assert {a.body["code"] for a in answers if a.status == 409} == {"AlreadyExists"}
    cluster_id, _, name = project.partition(":")
    bindings = crs.list_namespaced_custom_object(
        GROUP, VERSION, f"{cluster_id}-{name}", "projectroletemplatebindings"
    )["items"]
    assert [
        b["spec"]["roleTemplateName"] for b in bindings if b["spec"]["userName"] == person.id
    ] == ["read-only"]

    grant = {"clusterId": cluster, "userId": person.id, "roleTemplateId": "cluster-member"}
    answers = together(*(
        lambda a=a: a.post("/v3/clusterroletemplatebindings", grant) for a in [api, replica] * 3
    ))  # fmt: skip
    assert sorted(a.status for a in answers) == [201] + [409] * 5, [a.body for a in answers]


def test_users_created_together_with_one_username_make_one_user(
    api: Api, replica: Api, crs: k8s.CustomObjectsApi
) -> None:
    username = unique("same")
    body = {"username": username, "password": secrets.token_urlsafe(16)}
    answers = together(*(lambda a=a: a.post("/v3/users", body) for a in [api, replica] * 3))
    assert sorted(a.status for a in answers) == [201] + [409] * 5, [a.body for a in answers]
    assert {a.body["code"] for a in answers if a.status == 409} == {"AlreadyExists"}
    users = crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"]
    named = [u["metadata"]["name"] for u in users if u["spec"].get("username") == username]
    assert len(named) == 1

    # The username is free again once its user is gone.
    assert api.delete(f"/v3/users/{named[0]}").status == 204
    again = wait_for(
        "the username free again",
        lambda: (r := api.post("/v3/users", body)).status == 201 and r,
        60,
    )
    assert again.body["username"] == username


# -- a creator reads their project --------------------------------------------------------------


def test_the_creator_sees_their_project_at_once(
    api: Api, cluster: str, make_user: Callable[..., Person]
) -> None:
    member = make_user()
    granted = api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": cluster, "userId": member.id, "roleTemplateId": "cluster-member"},
    )
    assert granted.status == 201, granted.body
    for _ in range(3):
        created = member.api.post("/v3/projects", {"name": unique("mine"), "clusterId": cluster})
        assert created.status == 201, created.body
        pid = created.body["id"]
        got = member.api.get(f"/v3/projects/{pid}")
        assert got.status == 200, got.body
        changed = member.api.put(f"/v3/projects/{pid}", {"description": "mine"})
        assert changed.status == 200, changed.body
