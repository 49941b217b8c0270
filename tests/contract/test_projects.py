"""`/v3/projects`: create, list, get, update (quota validation and admission) and delete,
in a Cluster written directly (no downstream behind it) and in `local`, the management
cluster itself, whose namespaces quota admission counts. No operator runs, so a project stays
`initializing`."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import Api, error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
QUOTA = {
    "resourceQuota": {"limit": {"limitsCpu": "2"}},
    "namespaceDefaultResourceQuota": {"limit": {"limitsCpu": "1"}},
}


async def create(api: Api, cluster: str, **fields: Any) -> dict[str, Any]:
    made = await api.post("/v3/projects", {"name": "team", "clusterId": cluster, **fields})
    assert made.status == 201, made.body
    return dict(made.body)


async def test_a_project_is_created_with_its_owner_binding(
    admin: Person, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(admin.api, cluster, description="d", **QUOTA)
    project_id = made["id"]
    namespace, name = project_id.split(":")
    assert namespace == cluster and name.startswith("p-")
    assert made["type"] == "project" and made["clusterId"] == cluster
    assert made["name"] == made["displayName"] == "team" and made["description"] == "d"
    assert made["resourceQuota"] == QUOTA["resourceQuota"]
    assert made["state"] == "initializing" and made["transitioning"] == "yes"
    assert made["links"]["projectRoleTemplateBindings"] == (
        f"{EXTERNAL_URL}/v3/projectroletemplatebindings?projectId={project_id}"
    )
    stored = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "projects", name)
    assert stored["spec"]["clusterName"] == cluster
    assert stored["metadata"]["annotations"][names.ANNOTATION_CREATOR] == admin.id
    backing = names.backing_namespace(cluster, name)
    bindings = crs.list_namespaced_custom_object(
        GROUP, VERSION, backing, "projectroletemplatebindings"
    )["items"]
    assert [(b["spec"]["userName"], b["spec"]["roleTemplateName"]) for b in bindings] == [
        (admin.id, "project-owner")
    ]


async def test_projects_list_by_cluster_and_get(admin: Person, cluster: str) -> None:
    made = await create(admin.api, cluster)
    listed = await admin.api.get(f"/v3/projects?clusterId={cluster}")
    assert listed.status == 200
    assert {p["clusterId"] for p in listed.body["data"]} == {cluster}
    assert made["id"] in {p["id"] for p in listed.body["data"]}
    assert listed.body["createTypes"] == {"project": f"{EXTERNAL_URL}/v3/projects"}
    elsewhere = await admin.api.get("/v3/projects?clusterId=local")
    assert made["id"] not in {p["id"] for p in elsewhere.body["data"]}
    shown = await admin.api.get(f"/v3/projects/{made['id']}")
    assert shown.status == 200
    assert shown.body["metadata"]["uid"] == made["metadata"]["uid"]


async def test_a_project_of_a_cluster_the_user_is_not_in_is_invisible(
    admin: Person, make_user: Callable[..., Awaitable[Person]], cluster: str
) -> None:
    user = await make_user()
    project_id = (await create(admin.api, cluster))["id"]
    error(await user.api.get(f"/v3/projects/{project_id}"), 404, "NotFound")
    error(await user.api.put(f"/v3/projects/{project_id}", {"name": "x"}), 404, "NotFound")
    error(await user.api.delete(f"/v3/projects/{project_id}"), 404, "NotFound")
    listed = await user.api.get("/v3/projects")
    assert project_id not in {p["id"] for p in listed.body["data"]}
    # A cluster the user cannot see is named as one that does not exist.
    answer = await user.api.post("/v3/projects", {"name": "mine", "clusterId": cluster})
    error(answer, 422, "InvalidReference", "clusterId")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"resourceQuota": {"limit": {"limitsCpu": "2"}}}, "namespaceDefaultResourceQuota.limit"),
        ({"resourceQuota": {"limit": {"limitsCpu": "1"}},
          "namespaceDefaultResourceQuota": {"limit": {"limitsCpu": "2"}}},
         "namespaceDefaultResourceQuota.limit"),
        ({"resourceQuota": {"limit": {"gpus": "1"}}}, "resourceQuota.limit.gpus"),
        ({"resourceQuota": {"limit": {"limitsCpu": "lots"}}}, "resourceQuota.limit.limitsCpu"),
        ({"resourceQuota": []}, "resourceQuota"),
        ({"containerDefaultResourceLimit": {"pods": "1"}}, "containerDefaultResourceLimit.pods"),
        ({"podSecurityLevel": "lax"}, "podSecurityLevel"),
    ],
)  # fmt: skip
async def test_a_bad_quota_is_422_naming_the_field(
    admin: Person, cluster: str, fields: dict[str, Any], field: str
) -> None:
    body = {"name": "bad", "clusterId": cluster, **fields}
    answer = await admin.api.post("/v3/projects", body)
    assert answer.status == 422, answer.body
    assert answer.body["fieldName"] == field, answer.body


async def test_a_project_needs_a_name_and_a_known_cluster(admin: Person) -> None:
    error(await admin.api.post("/v3/projects", {"clusterId": "local"}), 422, "MissingRequired",
          "displayName")  # fmt: skip
    error(await admin.api.post("/v3/projects", {"name": "x", "clusterId": "c-none"}), 422,
          "InvalidReference", "clusterId")  # fmt: skip


async def test_an_update_changes_the_name_and_checks_the_quota(
    admin: Person, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(admin.api, cluster)
    path = f"/v3/projects/{made['id']}"
    renamed = await admin.api.put(path, {"name": "renamed", "description": "new"})
    assert renamed.status == 200, renamed.body
    assert renamed.body["displayName"] == "renamed" and renamed.body["description"] == "new"
    name = made["id"].split(":")[1]
    stored = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "projects", name)
    assert stored["spec"]["displayName"] == "renamed"
    bad = await admin.api.put(path, {"resourceQuota": {"limit": {"limitsCpu": "2"}}})
    error(bad, 422, "InvalidFormat", "namespaceDefaultResourceQuota.limit")
    error(await admin.api.put(path, {"clusterId": "local"}), 422, "InvalidAction", "clusterId")


async def test_a_quota_must_hold_the_namespaces_the_project_has(
    admin: Person, core: k8s.CoreV1Api
) -> None:
    made = await create(admin.api, "local")
    project = made["id"].split(":")[1]
    namespaces = [f"contract-{secrets.token_hex(3)}" for _ in range(2)]
    for namespace in namespaces:
        labels = {names.LABEL_PROJECT: project}
        core.create_namespace(
            k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace, labels=labels))
        )
    path = f"/v3/projects/{made['id']}"
    # Two namespaces of one cpu each do not fit in one.
    tight = {"resourceQuota": {"limit": {"limitsCpu": "1"}},
             "namespaceDefaultResourceQuota": {"limit": {"limitsCpu": "1"}}}  # fmt: skip
    error(await admin.api.put(path, tight), 422, "QuotaExceeded", "limitsCpu")
    fits = await admin.api.put(path, QUOTA)
    assert fits.status == 200, fits.body
    assert fits.body["resourceQuota"] == QUOTA["resourceQuota"]
    usage = await admin.api.get(f"{path}?include=usage")
    assert usage.body["usage"]["limit"] == {"limitsCpu": "2"}


async def test_deleting_a_project_deletes_it(
    admin: Person, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(admin.api, cluster)
    name = made["id"].split(":")[1]
    stored = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "projects", name)
    # The operator's finalizer from the start: its deletion handler (which removes the
    # project's namespaces downstream) runs even for a project deleted before it first saw it.
    assert stored["metadata"]["finalizers"] == [names.FINALIZER_OPERATOR]
    assert (await admin.api.delete(f"/v3/projects/{made['id']}")).status == 204
    # No operator runs in this tier: the project waits, marked, for its handler.
    deleting = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "projects", name)
    assert deleting["metadata"]["deletionTimestamp"]


async def test_unknown_and_malformed_ids_are_404(admin: Person, cluster: str) -> None:
    for pid in (f"{cluster}:p-none", "no-colon", "a:b:c"):
        error(await admin.api.get(f"/v3/projects/{pid}"), 404, "NotFound")


async def test_a_plain_user_may_not_loosen_pod_security(
    make_user: Callable[..., Awaitable[Person]], admin: Person, cluster: str
) -> None:
    person = await make_user()
    granted = await admin.api.post("/v3/clusterroletemplatebindings",
                                   {"clusterId": cluster, "userId": person.id,
                                    "roleTemplateId": "cluster-member"})  # fmt: skip
    assert granted.status == 201, granted.body
    answer = await person.api.post(
        "/v3/projects", {"name": "p", "clusterId": cluster, "podSecurityLevel": "privileged"}
    )
    error(answer, 403, "PermissionDenied")
    allowed = await person.api.post("/v3/projects", {"name": "p", "clusterId": cluster})
    assert allowed.status == 201, allowed.body
