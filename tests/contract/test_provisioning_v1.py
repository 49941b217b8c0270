"""`/v1/provisioning.svc.io.clusters`: the Steve-shaped view of a provisioned cluster and its
machine pools, as far as it goes without the operator: what a request writes to the Cluster
and its NodePools, the envelope, and the errors. A cluster made here stays `pending`."""

from __future__ import annotations

import datetime
import secrets
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names
from corral.core.provisioning import catalog

from .client import Api, error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
TYPE = "/v1/provisioning.svc.io.clusters"
NAMESPACE = "team-a"


@pytest.fixture(scope="module")
async def template(admin: Person) -> str:
    made = await admin.api.post("/v3/nodetemplates", {"name": "small", "kwokConfig": {}})
    assert made.status == 201, made.body
    return str(made.body["id"])


def pool(name: str, template: str, quantity: int = 1) -> dict[str, Any]:
    return {"name": name, "quantity": quantity, "workerRole": True,
            "machineConfigRef": {"kind": "NodeTemplate", "name": template}}  # fmt: skip


def body(name: str, pools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "provisioning.svc.io.cluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"kubernetesVersion": catalog.UPSTREAM_VERSION,
                 "rkeConfig": {"machinePools": pools}},
    }  # fmt: skip


async def create(api: Api, name: str, pools: list[dict[str, Any]]) -> dict[str, Any]:
    made = await api.post(TYPE, body(name, pools))
    assert made.status == 201, made.body
    return dict(made.body)


def unique() -> str:
    return f"v1-{secrets.token_hex(3)}"


def nodepools(crs: k8s.CustomObjectsApi, cluster_id: str) -> dict[str, dict[str, Any]]:
    items = crs.list_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodepools")["items"]
    return {p["spec"]["machinePoolName"]: p for p in items}


async def test_a_cluster_made_through_the_view_is_a_cluster_and_its_pools(
    admin: Person, template: str, crs: k8s.CustomObjectsApi
) -> None:
    name = unique()
    made = await create(admin.api, name, [pool("workers", template, 2)])
    assert made["id"] == f"{NAMESPACE}/{name}" and made["type"] == "provisioning.svc.io.cluster"
    assert made["apiVersion"] == "provisioning.svc.io/v1" and made["kind"] == "Cluster"
    assert made["metadata"]["name"] == name and made["metadata"]["namespace"] == NAMESPACE
    assert made["metadata"]["state"]["name"] == "pending"
    assert made["spec"]["kubernetesVersion"] == catalog.UPSTREAM_VERSION
    cluster_id = made["status"]["clusterName"]
    assert cluster_id.startswith("c-m-") and made["status"]["ready"] is False
    self_url = f"{EXTERNAL_URL}{TYPE}/{NAMESPACE}/{name}"
    assert made["links"] == {"self": self_url, "update": self_url, "remove": self_url,
                             "cluster": f"{EXTERNAL_URL}/v3/clusters/{cluster_id}"}  # fmt: skip
    (shown,) = made["spec"]["rkeConfig"]["machinePools"]
    assert (shown["name"], shown["quantity"]) == ("workers", 2)

    stored = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster_id)
    assert stored["spec"]["driver"] == "rke2"
    assert stored["spec"]["kubernetesVersion"] == catalog.UPSTREAM_VERSION
    assert stored["metadata"]["labels"] == {"provisioning.svc.io/namespace": NAMESPACE,
                                            "provisioning.svc.io/name": name}  # fmt: skip
    (stored_pool,) = nodepools(crs, cluster_id).values()
    assert stored_pool["spec"]["quantity"] == 2
    assert stored_pool["spec"]["nodeTemplateName"] == template

    fetched = await admin.api.get(f"{TYPE}/{NAMESPACE}/{name}")
    assert fetched.status == 200 and fetched.body["metadata"]["uid"] == made["metadata"]["uid"]
    # The type matches singular or plural, in any case.
    assert (
        await admin.api.get(f"/v1/Provisioning.SVC.io.Cluster/{NAMESPACE}/{name}")
    ).status == 200


async def test_the_collection_is_steves(admin: Person, template: str) -> None:
    names_made = sorted([unique(), unique()])
    for name in names_made:
        await create(admin.api, name, [pool("p", template)])
    listed = await admin.api.get(f"{TYPE}/{NAMESPACE}")
    assert listed.status == 200
    envelope = listed.body
    assert envelope["type"] == "collection" and envelope["resourceType"] == (
        "provisioning.svc.io.cluster"
    )
    assert envelope["createTypes"] == {"provisioning.svc.io.cluster": f"{EXTERNAL_URL}{TYPE}"}
    assert envelope["revision"] and envelope["count"] == len(envelope["data"])
    ids = [c["id"] for c in envelope["data"]]
    assert ids == sorted(ids) and {f"{NAMESPACE}/{n}" for n in names_made} <= set(ids)
    first = await admin.api.get(f"{TYPE}?limit=1")
    assert len(first.body["data"]) == 1 and first.body["pagination"]["partial"] is True
    following = await admin.api.get(first.body["pagination"]["next"].removeprefix(EXTERNAL_URL))
    assert following.body["data"][0]["id"] > first.body["data"][0]["id"]
    error(await admin.api.get(f"{TYPE}?continue=a"), 422, "InvalidFormat", "continue")
    assert (await admin.api.get(f"{TYPE}/elsewhere")).body["data"] == []


async def test_a_plain_user_neither_sees_nor_makes_clusters(
    admin: Person, user: Person, template: str
) -> None:
    name = unique()
    await create(admin.api, name, [])
    error(await user.api.get(f"{TYPE}/{NAMESPACE}/{name}"), 404, "NotFound")
    listed = await user.api.get(TYPE)
    assert listed.body["data"] == [] and listed.body["createTypes"] == {}
    error(await user.api.post(TYPE, body(unique(), [])), 403, "PermissionDenied")
    error(await user.api.delete(f"{TYPE}/{NAMESPACE}/{name}"), 404, "NotFound")


async def test_a_name_is_taken_once(admin: Person) -> None:
    name = unique()
    await create(admin.api, name, [])
    error(await admin.api.post(TYPE, body(name, [])), 409, "AlreadyExists")


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        (lambda b: b["metadata"].pop("name"), "MissingRequired", "metadata.name"),
        (lambda b: b["metadata"].pop("namespace"), "MissingRequired", "metadata.namespace"),
        (lambda b: b.update(type="cluster"), "InvalidFormat", "type"),
        (lambda b: b["spec"].update(eksConfig={}), "InvalidOption", "spec.eksConfig"),
        (lambda b: b["spec"].update(kubernetesVersion="v0.1.0"), "InvalidOption",
         "spec.kubernetesVersion"),
        (lambda b: b["spec"]["rkeConfig"].update(machinePools=[pool("p", "nt-none")]),
         "InvalidReference", "spec.rkeConfig.machinePools[0].machineConfigRef.name"),
    ],
)  # fmt: skip
async def test_a_bad_create_is_422_naming_the_field(
    admin: Person, change: Any, code: str, field: str
) -> None:
    sent = body(unique(), [])
    change(sent)
    answer = await admin.api.post(TYPE, sent)
    assert answer.status == 422, answer.body
    assert (answer.body["code"], answer.body["fieldName"]) == (code, field)


async def test_an_update_is_conditional_on_the_view_not_on_status(
    admin: Person, template: str, crs: k8s.CustomObjectsApi
) -> None:
    name = unique()
    made = await create(admin.api, name, [pool("a", template)])
    cluster_id, path = made["status"]["clusterName"], f"{TYPE}/{NAMESPACE}/{name}"
    read = (await admin.api.get(path)).body
    # The operator writes status: that makes no version a client read stale.
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {"type": "Pending", "status": "True", "reason": "Waiting", "message": "",
                 "lastTransitionTime": now}  # fmt: skip
    crs.patch_cluster_custom_object_status(
        GROUP, VERSION, "clusters", cluster_id, {"status": {"conditions": [condition]}}
    )
    read["spec"]["rkeConfig"]["machinePools"] = [pool("a", template, 3), pool("b", template)]
    changed = await admin.api.put(path, read)
    assert changed.status == 200, changed.body
    assert {p.get("quantity") for p in changed.body["spec"]["rkeConfig"]["machinePools"]} == {1, 3}
    assert {n: p["spec"]["quantity"] for n, p in nodepools(crs, cluster_id).items()} == {
        "a": 3,
        "b": 1,
    }
    # The same read again is stale now: the pools changed under it.
    read["spec"]["rkeConfig"]["machinePools"] = []
    error(await admin.api.put(path, read), 409, "Conflict")
    renamed = {"metadata": {"name": "other"}, "spec": {}}
    error(await admin.api.put(path, renamed), 422, "InvalidAction", "metadata.name")


async def test_deleting_through_the_view_deletes_the_cluster(
    admin: Person, crs: k8s.CustomObjectsApi
) -> None:
    name = unique()
    cluster_id = (await create(admin.api, name, []))["status"]["clusterName"]
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster_id)
    # The operator's finalizer from the start: a cluster deleted before the operator first saw
    # it still has its machines, namespace and credentials removed.
    assert stored["metadata"]["finalizers"] == [names.FINALIZER_OPERATOR]
    assert (await admin.api.delete(f"{TYPE}/{NAMESPACE}/{name}")).status == 204
    # No operator runs in this tier: the cluster waits, marked, for its handler.
    deleting = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster_id)
    assert deleting["metadata"]["deletionTimestamp"]


async def test_other_types_and_unknown_clusters_are_404(admin: Person) -> None:
    error(await admin.api.get("/v1/management.svc.io.clusters"), 404, "NotFound")
    error(await admin.api.get(f"{TYPE}/{NAMESPACE}/nothing"), 404, "NotFound")


async def test_spec_4_4s_body_changes_the_same_pools(
    admin: Person, template: str, crs: k8s.CustomObjectsApi
) -> None:
    """`PUT` with `{"machinePools": [...]}` at the top level, as spec 4.4 writes it: the pools of
    `spec.rkeConfig.machinePools`, an existing pool keeping its template and roles."""
    name = unique()
    made = await create(admin.api, name, [pool("workers", template)])
    cluster_id, path = made["status"]["clusterName"], f"{TYPE}/{NAMESPACE}/{name}"
    scaled = {"name": "workers", "quantity": 3, "autoscalingMinSize": 1,
              "autoscalingMaxSize": 5, "workerRole": True}  # fmt: skip
    changed = await admin.api.put(path, {"machinePools": [scaled]})
    assert changed.status == 200, changed.body
    (shown,) = changed.body["spec"]["rkeConfig"]["machinePools"]
    assert (shown["quantity"], shown["autoscalingMinSize"], shown["autoscalingMaxSize"]) == (
        3,
        1,
        5,
    )
    assert shown["machineConfigRef"] == {"kind": "NodeTemplate", "name": template}
    stored = nodepools(crs, cluster_id)["workers"]["spec"]
    assert (stored["quantity"], stored["autoscalingMinSize"], stored["autoscalingMaxSize"]) == (
        3, 1, 5,
    )  # fmt: skip
    assert stored["nodeTemplateName"] == template and stored["worker"] is True

    # A new pool has no template to keep: 422 naming the field, and nothing changes.
    fresh = {"name": "more", "quantity": 1, "workerRole": True}
    answer = await admin.api.put(path, {"machinePools": [scaled, fresh]})
    error(answer, 422, "MissingRequired", "machinePools[1].machineConfigRef")
    both = {"machinePools": [scaled], "spec": {"rkeConfig": {"machinePools": [scaled]}}}
    error(await admin.api.put(path, both), 422, "InvalidFormat", "machinePools")
    assert set(nodepools(crs, cluster_id)) == {"workers"}
    assert nodepools(crs, cluster_id)["workers"]["spec"]["quantity"] == 3
