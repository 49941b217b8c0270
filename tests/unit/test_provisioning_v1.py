"""The `/v1` view's pure rules: machine pools checked and mapped to NodePools, the view of a
Cluster, what a body may say, and the Steve envelope."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import MultiDict

from corral.apiserver.http import steve
from corral.core.errors import Invalid
from corral.core.provisioning import machinepools, v1
from corral.core.provisioning.machinepools import MachinePool

WORKERS = {
    "name": "workers",
    "quantity": 2,
    "workerRole": True,
    "machineConfigRef": {"kind": "NodeTemplate", "name": "nt-abcde"},
}


def parsed(*pools: dict[str, Any], cluster: str = "demo") -> list[MachinePool]:
    return machinepools.parse(list(pools), cluster, v1.POOLS)


def refused(*pools: dict[str, Any], cluster: str = "demo") -> Invalid:
    with pytest.raises(Invalid) as caught:
        parsed(*pools, cluster=cluster)
    return caught.value


def test_a_pool_is_read_with_its_defaults() -> None:
    (pool,) = parsed(WORKERS)
    assert pool == MachinePool(
        name="workers", quantity=2, etcd=False, control_plane=False, worker=True,
        drain_before_delete=False, template="nt-abcde",
    )  # fmt: skip
    (bounded,) = parsed({**WORKERS, "quantity": None, "autoscalingMinSize": 2,
                         "autoscalingMaxSize": 4} | {"quantity": 3})  # fmt: skip
    assert (bounded.min_size, bounded.max_size, bounded.quantity) == (2, 4, 3)
    unsized = {k: v for k, v in WORKERS.items() if k != "quantity"}
    assert parsed(unsized)[0].quantity == 1
    assert parsed({**unsized, "autoscalingMinSize": 3, "autoscalingMaxSize": 5})[0].quantity == 3


@pytest.mark.parametrize(
    ("change", "field", "code"),
    [
        ({"autoscalingMinSize": 3, "autoscalingMaxSize": 2}, "[0].autoscalingMinSize", None),
        ({"autoscalingMinSize": 1}, "[0].autoscalingMaxSize", None),
        ({"autoscalingMaxSize": 4}, "[0].autoscalingMinSize", None),
        ({"autoscalingMinSize": 3, "autoscalingMaxSize": 5}, "[0].quantity", None),
        ({"autoscalingMinSize": 0, "autoscalingMaxSize": 1, "quantity": 6}, "[0].quantity", None),
        ({"workerRole": False}, "[0].workerRole", None),
        ({"workerRole": "yes"}, "[0].workerRole", None),
        ({"quantity": -1}, "[0].quantity", None),
        ({"quantity": True}, "[0].quantity", None),
        ({"quantity": 1001}, "[0].quantity", None),
        ({"name": ""}, "[0].name", "MissingRequired"),
        ({"name": "Bad_Name"}, "[0].name", None),
        ({"name": "w" * 60}, "[0].name", None),
        ({"machineConfigRef": None}, "[0].machineConfigRef", "MissingRequired"),
        ({"machineConfigRef": {"kind": "Amazonec2Config", "name": "x"}},
         "[0].machineConfigRef.kind", "InvalidOption"),
        ({"machineConfigRef": {"kind": "NodeTemplate"}}, "[0].machineConfigRef.name",
         "MissingRequired"),
        ({"machineConfigRef": {"name": "nt-a", "namespace": "fleet-default"}},
         "[0].machineConfigRef.namespace", None),
        ({"paused": True}, "[0].paused", None),
    ],
)  # fmt: skip
def test_a_bad_pool_is_refused_naming_its_field(
    change: dict[str, Any], field: str, code: str | None
) -> None:
    error = refused({**WORKERS, **change})
    assert error.field == v1.POOLS + field, error.message
    if code is not None:
        assert error.code == code


def test_etcd_and_control_plane_pools_keep_at_least_one_machine() -> None:
    for role in ("etcdRole", "controlPlaneRole"):
        pool = {**WORKERS, role: True, "quantity": 0}
        error = refused({**pool, "autoscalingMinSize": 0, "autoscalingMaxSize": 2})
        assert error.field == f"{v1.POOLS}[0].autoscalingMinSize"
    worker_only = {**WORKERS, "quantity": 0, "autoscalingMinSize": 0, "autoscalingMaxSize": 2}
    assert parsed(worker_only)[0].min_size == 0


def test_pool_names_are_unique_and_leave_room_for_hostnames() -> None:
    error = refused(WORKERS, {**WORKERS, "quantity": 1})
    assert (error.field, error.code) == (f"{v1.POOLS}[1].name", "NotUnique")
    # <cluster>-<pool>- plus a number of 5 digits is one DNS label.
    assert parsed({**WORKERS, "name": "p" * 52}, cluster="abcd")
    assert refused({**WORKERS, "name": "p" * 53}, cluster="abcd").field == f"{v1.POOLS}[0].name"
    assert refused("not a pool").field == f"{v1.POOLS}[0]"  # type: ignore[arg-type]
    with pytest.raises(Invalid):
        machinepools.parse({"name": "x"}, "demo", v1.POOLS)
    with pytest.raises(Invalid):
        machinepools.parse([WORKERS] * (machinepools.MAX_POOLS + 1), "demo", v1.POOLS)


def test_a_pool_is_a_nodepool_with_role_labels_and_back() -> None:
    (pool,) = parsed({**WORKERS, "etcdRole": True, "autoscalingMinSize": 1,
                      "autoscalingMaxSize": 3, "drainBeforeDelete": True})  # fmt: skip
    spec = machinepools.nodepool_spec(pool, "c-m-abcdefgh", "demo")
    assert spec == {
        "clusterName": "c-m-abcdefgh",
        "machinePoolName": "workers",
        "displayName": "workers",
        "hostnamePrefix": "demo-workers-",
        "quantity": 2,
        "etcd": True,
        "controlPlane": False,
        "worker": True,
        "nodeTemplateName": "nt-abcde",
        "nodeLabels": {"node-role.kubernetes.io/etcd": "true",
                       "node-role.kubernetes.io/worker": "true"},
        "drainBeforeDelete": True,
        "autoscalingMinSize": 1,
        "autoscalingMaxSize": 3,
    }  # fmt: skip
    assert machinepools.of_nodepool(spec) == pool
    assert pool.shown() == {**WORKERS, "etcdRole": True, "controlPlaneRole": False,
                            "drainBeforeDelete": True, "autoscalingMinSize": 1,
                            "autoscalingMaxSize": 3}  # fmt: skip


def test_changes_patch_only_what_may_change_and_drop_bounds_together() -> None:
    (bounded,) = parsed({**WORKERS, "autoscalingMinSize": 1, "autoscalingMaxSize": 3})
    current = machinepools.nodepool_spec(bounded, "c", "demo")
    (plain,) = parsed({**WORKERS, "quantity": 5})
    ops = machinepools.changes(current, machinepools.nodepool_spec(plain, "c", "demo"))
    assert ops == [
        {"op": "add", "path": "/spec/quantity", "value": 5},
        {"op": "remove", "path": "/spec/autoscalingMinSize"},
        {"op": "remove", "path": "/spec/autoscalingMaxSize"},
    ]
    assert machinepools.changes(current, current) == []
    assert machinepools.role_change(plain, bounded) is None
    assert machinepools.role_change(plain, parsed({**WORKERS, "etcdRole": True})[0]) == "etcdRole"


def test_the_plan_matches_pools_by_name() -> None:
    def nodepool(name: str) -> dict[str, Any]:
        return {"metadata": {"name": f"np-{name}"}, "spec": {"machinePoolName": name}}

    existing = [nodepool("a"), nodepool("b")]
    desired = parsed({**WORKERS, "name": "b"}, {**WORKERS, "name": "c"})
    plan = machinepools.plan(existing, desired)
    assert [p.name for p in plan.create] == ["c"]
    assert [(o["metadata"]["name"], p.name) for o, p in plan.update] == [("np-b", "b")]
    assert [o["metadata"]["name"] for o in plan.delete] == ["np-a"]


def test_the_pools_hash_moves_with_any_pool_field_only() -> None:
    one = parsed(WORKERS, {**WORKERS, "name": "other"})
    assert machinepools.pools_hash(one) == machinepools.pools_hash(list(reversed(one)))
    assert machinepools.pools_hash(one) != machinepools.pools_hash(
        parsed(WORKERS, {**WORKERS, "name": "other", "quantity": 3})
    )


CLUSTER: dict[str, Any] = {
    "metadata": {
        "name": "c-m-abcdefgh",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 2,
        "creationTimestamp": "2026-11-24T10:00:00Z",
        "labels": {v1.LABEL_NAMESPACE: "team", v1.LABEL_NAME: "demo", "env": "dev"},
    },
    "spec": {
        "driver": "k3s",
        "kubernetesVersion": "v1.36.3",
        "k3sConfig": {"kubernetesVersion": "v1.36.3", "networking": {"plugin": "flannel"}},
    },
    "status": {
        "observedGeneration": 2,
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "Pending", "status": "True"}],
    },
}


def test_the_view_of_a_cluster() -> None:
    (pool,) = parsed(WORKERS)
    shown = v1.render(CLUSTER, [pool], ("pending", "yes", "waiting"))
    assert (shown["apiVersion"], shown["kind"]) == ("provisioning.svc.io/v1", "Cluster")
    meta = shown["metadata"]
    assert (meta["namespace"], meta["name"], meta["resourceVersion"]) == ("team", "demo", "2.0")
    assert meta["labels"] == {"env": "dev"}
    assert meta["state"] == {"name": "pending", "error": False, "transitioning": True,
                             "message": "waiting"}  # fmt: skip
    assert shown["spec"]["kubernetesVersion"] == "v1.36.3"
    assert shown["spec"]["rkeConfig"] == {
        "machinePools": [pool.shown()], "networking": {"plugin": "flannel"},
    }  # fmt: skip
    assert shown["status"]["clusterName"] == "c-m-abcdefgh"
    assert shown["status"]["ready"] is False
    assert [c["type"] for c in shown["status"]["conditions"]] == ["Pending", "Ready"]
    # A cluster made through /v3 has no name of the view: Rancher's namespace and its id.
    plain = {**CLUSTER, "metadata": {**CLUSTER["metadata"], "labels": {}}}
    assert v1.name_of(plain) == ("fleet-default", "c-m-abcdefgh")


def test_the_views_version_moves_with_the_spec_and_the_pools_not_the_status() -> None:
    version = v1.resource_version(CLUSTER)
    assert version == "2.0"  # no pools put through the view yet
    status_written = {**CLUSTER, "metadata": {**CLUSTER["metadata"], "resourceVersion": "99"},
                      "status": {"conditions": []}}  # fmt: skip
    assert v1.resource_version(status_written) == version
    respec = {**CLUSTER, "metadata": {**CLUSTER["metadata"], "generation": 3}}
    assert v1.resource_version(respec) == "3.0"
    digest = machinepools.pools_hash(parsed(WORKERS))
    annotations = {v1.ANNOTATION_POOLS_HASH: digest}
    pooled = {**CLUSTER, "metadata": {**CLUSTER["metadata"], "annotations": annotations}}
    assert v1.resource_version(pooled) == f"2.{digest[:12]}"
    # What it is made of is what a conditional update is written on condition of.
    assert v1.VERSION_READS == (
        ("metadata", "generation"), ("metadata", "annotations", v1.ANNOTATION_POOLS_HASH),
    )  # fmt: skip


def test_the_types_and_names_of_the_view() -> None:
    for text in ("provisioning.svc.io.cluster", "Provisioning.svc.io.Clusters"):
        assert v1.is_type(text)
    assert not v1.is_type("provisioning.svc.io.nodes")
    assert v1.cluster_id("team", "demo") == v1.cluster_id("team", "demo")
    assert v1.cluster_id("team", "demo").startswith("c-m-")
    assert v1.cluster_id("team", "demo") != v1.cluster_id("demo", "team")


def test_v3_labels_never_set_or_change_the_views_name() -> None:
    named = {v1.LABEL_NAMESPACE: "team", v1.LABEL_NAME: "demo"}
    v1.check_labels({**named, "env": "dev"}, named)
    v1.check_labels({"env": "dev"}, {})
    for given, current in (({v1.LABEL_NAME: "x"}, {}), ({v1.LABEL_NAME: "x"}, named)):
        with pytest.raises(Invalid) as caught:
            v1.check_labels(given, current)
        assert (caught.value.field, caught.value.code) == ("labels", "InvalidAction")


def test_what_a_body_may_say() -> None:
    given = v1.parse(
        {
            "type": "provisioning.svc.io.cluster",
            "metadata": {"name": "demo", "namespace": "team", "resourceVersion": "7"},
            "spec": {"kubernetesVersion": "v1.36.3+k3s1",
                     "rkeConfig": {"machinePools": [WORKERS], "networking": {"plugin": "none"}}},
        },
    )  # fmt: skip
    assert (given.namespace, given.name, given.resource_version) == ("team", "demo", "7")
    assert v1.machine_pools(given, "demo") == parsed(WORKERS)
    assert (given.driver, v1.flavour_of(given)) == (None, "k3s")
    assert v1.parse({"spec": {"rkeConfig": {}}}).pools is None
    assert v1.flavour_of(v1.parse({"spec": {"kubernetesVersion": "v1.36.3"}})) == "rke2"
    assert v1.flavour_of(v1.parse({"spec": {"k3sConfig": {}}})) == "k3s"


def test_spec_4_4s_body_gives_the_same_pools_at_the_top_level() -> None:
    spec_shaped = v1.parse({"machinePools": [WORKERS]})
    assert spec_shaped.pools_at == "machinePools"
    assert v1.machine_pools(spec_shaped, "demo") == parsed(WORKERS)
    with pytest.raises(Invalid) as caught:
        v1.machine_pools(v1.parse({"machinePools": [{"name": "w", "workerRole": True}]}), "demo")
    assert (caught.value.field, caught.value.code) == (
        "machinePools[0].machineConfigRef",
        "MissingRequired",
    )
    with pytest.raises(Invalid) as caught:
        v1.parse({"machinePools": [], "spec": {"rkeConfig": {"machinePools": []}}})
    assert caught.value.field == "machinePools"


def test_an_existing_pool_keeps_its_template_and_roles_when_the_body_leaves_them_out() -> None:
    (existing,) = parsed({**WORKERS, "etcdRole": True})
    scaled = {"name": "workers", "quantity": 5, "autoscalingMinSize": 1, "autoscalingMaxSize": 9}
    (pool,) = machinepools.parse([scaled], "demo", "machinePools", [existing])
    assert (pool.template, pool.etcd, pool.worker, pool.control_plane) == (
        "nt-abcde", True, True, False,
    )  # fmt: skip
    assert (pool.quantity, pool.min_size, pool.max_size) == (5, 1, 9)
    # A role given is the request's: a change is for the service to refuse.
    (unrolled,) = machinepools.parse([{**scaled, "etcdRole": False}], "demo", "m", [existing])
    assert (unrolled.etcd, unrolled.worker) == (False, True)
    # Another pool's template is no default.
    with pytest.raises(Invalid) as caught:
        machinepools.parse([{**scaled, "name": "new", "workerRole": True}], "demo", "machinePools",
                          [existing])  # fmt: skip
    assert caught.value.field == "machinePools[0].machineConfigRef"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"spec": {"rke2Config": {}, "k3sConfig": {}}}, "spec.k3sConfig"),
        ({"spec": {"displayName": "x"}}, "spec.displayName"),
        ({"spec": {"rkeConfig": {"chartValues": {}}}}, "spec.rkeConfig.chartValues"),
        ({"spec": {"rkeConfig": []}}, "spec.rkeConfig"),
        ({"metadata": {"name": "Not A Label"}}, "metadata.name"),
        ({"metadata": {"namespace": ""}}, "metadata.namespace"),
        ({"metadata": {"resourceVersion": 7}}, "metadata.resourceVersion"),
        ({"type": "cluster"}, "type"),
        ({"kind": "Pod"}, "kind"),
    ],
)
def test_a_bad_body_is_refused_naming_its_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(Invalid) as caught:
        v1.parse(body)
    assert caught.value.field == field


def test_the_steve_envelope_flattens_and_renames_clashing_keys() -> None:
    obj = {"apiVersion": "a/v1", "kind": "K", "type": "mine",
           "metadata": {"namespace": "ns", "name": "n"}, "spec": {}}  # fmt: skip
    shown = steve.resource("https://x", "a.k", "a.ks", obj, writable=True)
    assert shown["id"] == "ns/n" and shown["type"] == "a.k" and shown["_type"] == "mine"
    url = "https://x/v1/a.ks/ns/n"
    assert shown["links"] == {"self": url, "update": url, "remove": url}
    assert steve.resource("https://x", "a.k", "a.ks", obj, writable=False)["links"] == {"self": url}


def test_steve_collections_page_with_a_continue_token() -> None:
    items = [(f"ns/{n}", n) for n in "cab"]

    def render(name: str) -> dict[str, Any]:
        return {"id": f"ns/{name}"}

    first = steve.collection("https://x", "/v1/a.ks", "a.k", "a.ks", items, render,
                             MultiDict(limit="2"), "9", can_create=True)  # fmt: skip
    assert [i["id"] for i in first["data"]] == ["ns/a", "ns/b"]
    assert (first["type"], first["resourceType"], first["revision"]) == ("collection", "a.k", "9")
    assert first["createTypes"] == {"a.k": "https://x/v1/a.ks"}
    assert first["pagination"]["partial"] is True
    rest = steve.collection("https://x", "/v1/a.ks", "a.k", "a.ks", items, render,
                            MultiDict(limit="2", **{"continue": first["continue"]}), "9",
                            can_create=False)  # fmt: skip
    assert [i["id"] for i in rest["data"]] == ["ns/c"]
    assert "continue" not in rest and rest["createTypes"] == {}
    with pytest.raises(Invalid):
        steve.collection(
            "https://x", "/", "a.k", "a.ks", items, render, MultiDict(limit="x"), "", True
        )
