"""Two writers of one object's status: the node mirror and a drain both write a Node CR's
status, each as its own field manager, and neither erases what the other wrote. And the node
mirror removes only the Node CRs it made."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api

GROUP, VERSION = "management.svc.io", "v3"
SOURCE = "management.svc.io/node-source"
MIRROR_TYPES = {"Initialized", "Provisioned", "Registered", "Ready", "Updated"}


def condition(obj: dict[str, Any], type: str) -> dict[str, Any]:
    found = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in found if c["type"] == type), {})


def owned_condition_types(obj: dict[str, Any]) -> dict[str, set[str]]:
    """Per field manager, the condition types it applied to the status."""
    owned: dict[str, set[str]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        if entry.get("operation") != "Apply" or entry.get("subresource") != "status":
            continue
        keys = ((entry.get("fieldsV1") or {}).get("f:status") or {}).get("f:conditions") or {}
        owned[entry["manager"]] = {k.split('"')[3] for k in keys if k.startswith("k:")}
    return owned


def record_names(crs: k8s.CustomObjectsApi, cluster: str) -> set[str]:
    listed = cast(
        dict[str, Any], crs.list_namespaced_custom_object(GROUP, VERSION, cluster, "nodes")
    )
    return {n["metadata"]["name"] for n in listed["items"]}


@pytest.fixture
def lone_node(stack: Environment, downstream: k8s.ApiClient, crs: k8s.CustomObjectsApi,
              api: Api) -> Iterator[tuple[str, str]]:  # fmt: skip
    """A node of its own in the demo cluster (kwok keeps it Ready; a taint keeps other tests'
    pods off it) and the id of its Node CR; both gone afterwards."""
    core, cluster = k8s.CoreV1Api(downstream), stack.cluster_ids[0]
    name = f"demo-writers-{secrets.token_hex(3)}"
    core.create_node(
        k8s.V1Node(
            metadata=k8s.V1ObjectMeta(
                name=name,
                annotations={"kwok.x-k8s.io/node": "fake"},
                labels={"kubernetes.io/hostname": name, "type": "kwok"},
            ),
            spec=k8s.V1NodeSpec(
                taints=[k8s.V1Taint(key="e2e-status-writers", effect="NoSchedule")]
            ),
        )
    )
    mirrored = wait_for(
        "the node mirrored",
        lambda: next(
            (n for n in api.get(f"/v3/clusters/{cluster}/nodes").body["data"] if n["name"] == name),
            None,
        ),
        30,
    )
    yield name, mirrored["id"]
    core.delete_node(name)
    record = mirrored["id"].split(":")[1]
    wait_for("its record gone", lambda: record not in record_names(crs, cluster), 30)


def test_a_drain_and_the_node_mirror_keep_each_others_conditions(
    api: Api,
    stack: Environment,
    downstream: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
    lone_node: tuple[str, str],
) -> None:
    core, cluster = k8s.CoreV1Api(downstream), stack.cluster_ids[0]
    name, node_id = lone_node
    record = node_id.split(":")[1]
    url = f"/v3/clusters/{cluster}/nodes/{node_id}"

    def read() -> dict[str, Any]:
        found = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "nodes", record)
        return cast(dict[str, Any], found)

    def relabel(value: str) -> None:
        core.patch_node(name, {"metadata": {"labels": {"e2e-writers": value}}})

    assert read()["metadata"]["labels"][SOURCE] == "mirror"
    # The drain runs while the mirror writes what changed on the node.
    drain = {"timeout": 30, "ignoreDaemonSets": True}
    assert api.post(f"{url}?action=drain", drain).status == 200
    relabel("during")
    drained = wait_for(
        "Drained True", lambda: condition(read(), "Drained").get("status") == "True", 60
    )
    assert drained
    # The mirror writes again after the drain is done: Drained stays as the drain wrote it.
    relabel("after")
    after = wait_for(
        "the mirror's write after the drain",
        lambda: (obj := read())["status"]["nodeLabels"].get("e2e-writers") == "after" and obj,
        30,
    )
    found = {c["type"]: c for c in after["status"]["conditions"]}
    assert set(found) == MIRROR_TYPES | {"Drained"}
    assert (found["Drained"]["status"], found["Drained"]["reason"]) == ("True", "Drained")
    assert "evicted 0 pod(s)" in found["Drained"]["message"]
    assert after["status"]["drainRequest"]
    generation = after["metadata"]["generation"]
    assert {t: c.get("observedGeneration") for t, c in found.items()} == dict.fromkeys(
        found, generation
    )
    owned = owned_condition_types(after)
    assert owned["corral-node-mirror"] == MIRROR_TYPES
    assert owned["corral-drain"] == {"Drained"}
    # /v3 reads the record from its watch cache, which may trail what was just read from kube.
    wait_for(
        "Drained True in /v3",
        lambda: condition(api.get(url).body, "Drained").get("status") == "True",
        30,
    )

    # Uncordoned: the drain's writer says so; the mirror's conditions stay, restamped with the
    # new generation.
    assert api.post(f"{url}?action=uncordon").status == 200
    uncordoned = wait_for(
        "Drained False",
        lambda: (obj := read()) and condition(obj, "Drained").get("status") == "False" and obj,
        30,
    )
    assert condition(uncordoned, "Drained")["reason"] == "Uncordoned"
    assert condition(uncordoned, "Ready")["status"] == "True"

    def restamped() -> bool:
        obj = read()
        stamps = {c.get("observedGeneration") for c in obj["status"]["conditions"]}
        return stamps == {obj["metadata"]["generation"]}

    wait_for("every condition at the new generation", restamped, 30)


def test_the_node_mirror_removes_only_the_records_it_made(
    stack: Environment, crs: k8s.CustomObjectsApi
) -> None:
    cluster = stack.cluster_ids[0]
    suffix = secrets.token_hex(3)
    foreign, orphan = f"m-pool-{suffix}", f"m-orphan-{suffix}"

    def node_record(name: str, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Node",
            "metadata": {"name": name, "namespace": cluster, "labels": labels},
            "spec": {"requestedHostname": name},
        }

    # A node pool's record of a machine not yet in the cluster, then a record the mirror would
    # have made for a node that is gone.
    crs.create_namespaced_custom_object(GROUP, VERSION, cluster, "nodes", node_record(foreign, {}))
    try:
        crs.create_namespaced_custom_object(
            GROUP, VERSION, cluster, "nodes", node_record(orphan, {SOURCE: "mirror"})
        )
        # The pass that removes the orphan has seen the other record too.
        assert wait_for("the orphan removed", lambda: orphan not in record_names(crs, cluster), 30)
        assert foreign in record_names(crs, cluster)
    finally:
        try:
            crs.delete_namespaced_custom_object(GROUP, VERSION, cluster, "nodes", foreign)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
