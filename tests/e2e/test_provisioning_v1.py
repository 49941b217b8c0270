"""`/v1/provisioning.svc.io.clusters` on the main stack: the view of a provisioned cluster and
its machine pools, checked against the management Cluster and NodePools with the official
client. No real node runs here, so a provisioned cluster stays Pending and its pools make no
machine: that is fine for the view, which this module is about."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names
from corral.devenv.waiting import wait_for

from .api import Api, Response
from .conftest import Person
from .test_provisioning_admission import TWO_VERSIONS

GROUP, VERSION = names.GROUP, names.VERSION
TYPE = "/v1/provisioning.svc.io.clusters"
NAMESPACE = "team-a"

pytestmark = pytest.mark.usefixtures("two_versions")


@pytest.fixture
def two_versions(setting: Callable[[str, str], None]) -> None:
    setting("kubernetes-version-catalog", TWO_VERSIONS)


@pytest.fixture
def template(api: Api) -> Iterator[str]:
    made = api.post("/v3/nodetemplates", {"name": "small", "kwokConfig": {"cpu": "2"}})
    assert made.status == 201, made.body
    yield made.body["id"]
    # Deleting the clusters first (the `made` teardown) frees the template.
    wait_for("template deleted",
             lambda: api.delete(f"/v3/nodetemplates/{made.body['id']}").status in (204, 404),
             60)  # fmt: skip


@pytest.fixture
def made(api: Api, crs: k8s.CustomObjectsApi) -> Iterator[list[str]]:
    """Ids of the clusters a test made; deleted afterwards, waiting until they are gone."""
    ids: list[str] = []
    yield ids
    for cluster_id in ids:
        assert api.delete(f"/v3/clusters/{cluster_id}").status in (204, 404)
    wait_for("clusters deleted", lambda: not stored(crs) & set(ids), 90)


def stored(crs: k8s.CustomObjectsApi) -> set[str]:
    items = crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
    return {c["metadata"]["name"] for c in items}


def cluster_cr(crs: k8s.CustomObjectsApi, cluster_id: str) -> dict[str, Any]:
    return dict(crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster_id))


def written(crs: k8s.CustomObjectsApi, cluster_id: str) -> tuple[Any, ...]:
    """What a request may write of a cluster and its pools (the operator writes the status)."""
    meta = cluster_cr(crs, cluster_id)["metadata"]
    pools = {n: (p["metadata"]["name"], p["spec"]) for n, p in nodepools(crs, cluster_id).items()}
    ours = {k: v for k, v in (meta.get("annotations") or {}).items()
            if k.startswith("provisioning.svc.io/")}  # fmt: skip
    return cluster_cr(crs, cluster_id)["spec"], meta.get("labels"), ours, pools


def nodepools(crs: k8s.CustomObjectsApi, cluster_id: str) -> dict[str, dict[str, Any]]:
    """The cluster's NodePools by machine pool name."""
    items = crs.list_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodepools")["items"]
    return {p["spec"].get("machinePoolName", p["metadata"]["name"]): p for p in items}


def pool(name: str, template: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "quantity": 1,
        "workerRole": True,
        "machineConfigRef": {"kind": "NodeTemplate", "name": template},
        **fields,
    }


def body(name: str, pools: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "type": "provisioning.svc.io.cluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"kubernetesVersion": "v1.36.3", "rkeConfig": {"machinePools": pools}, **spec},
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def create(api: Api, made: list[str], payload: dict[str, Any]) -> Response:
    response = api.post(TYPE, payload)
    if response.status == 201:
        made.append(response.body["status"]["clusterName"])
    return response


def put_read(api: Api, path: str, change: Callable[[dict[str, Any]], None]) -> Response:
    """Reads the view, changes it and puts it back at the version read, as a client does (the
    operator's status writes do not make it stale)."""
    read = api.get(path).body
    change(read)
    return api.put(path, read)


def set_pools(pools: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    def change(read: dict[str, Any]) -> None:
        read["spec"]["rkeConfig"]["machinePools"] = pools

    return change


def refused(response: Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status == status, response.body
    assert response.body["type"] == "error", response.body
    if field is not None:
        assert response.body.get("fieldName") == field, response.body
    return dict(response.body)


def test_a_v1_cluster_is_a_cluster_and_its_nodepools(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str]
) -> None:
    name = unique("two")
    workers = pool("workers", template, quantity=2, autoscalingMinSize=1, autoscalingMaxSize=3,
                   drainBeforeDelete=True)  # fmt: skip
    control = pool("cp", template, workerRole=False, controlPlaneRole=True, etcdRole=True)
    created = create(api, made, body(name, [workers, control]))
    assert created.status == 201, created.body
    shown = created.body
    cluster_id = shown["status"]["clusterName"]
    assert cluster_id.startswith("c-m-")
    assert (shown["id"], shown["type"]) == (f"{NAMESPACE}/{name}", "provisioning.svc.io.cluster")
    assert (shown["apiVersion"], shown["kind"]) == ("provisioning.svc.io/v1", "Cluster")
    url = shown["links"]["self"]
    assert url.endswith(f"{TYPE}/{NAMESPACE}/{name}")
    assert shown["links"]["update"] == shown["links"]["remove"] == url
    assert shown["links"]["cluster"].endswith(f"/v3/clusters/{cluster_id}")

    stored_cluster = cluster_cr(crs, cluster_id)
    assert stored_cluster["spec"]["driver"] == "rke2"
    assert stored_cluster["spec"]["kubernetesVersion"] == "v1.36.3"
    assert stored_cluster["spec"]["displayName"] == name
    assert stored_cluster["metadata"]["labels"] == {
        "provisioning.svc.io/namespace": NAMESPACE, "provisioning.svc.io/name": name,
    }  # fmt: skip
    pools = nodepools(crs, cluster_id)
    assert set(pools) == {"workers", "cp"}
    spec = pools["workers"]["spec"]
    assert pools["workers"]["metadata"]["name"].startswith("np-")
    assert (spec["quantity"], spec["autoscalingMinSize"], spec["autoscalingMaxSize"]) == (2, 1, 3)
    assert (spec["worker"], spec["etcd"], spec["controlPlane"]) == (True, False, False)
    assert spec["nodeTemplateName"] == template and spec["drainBeforeDelete"] is True
    assert spec["hostnamePrefix"] == f"{name}-workers-"
    assert spec["nodeLabels"] == {"node-role.kubernetes.io/worker": "true"}
    assert pools["cp"]["spec"]["nodeLabels"] == {
        "node-role.kubernetes.io/etcd": "true", "node-role.kubernetes.io/control-plane": "true",
    }  # fmt: skip

    # The /v3 view of the same cluster.
    v3 = api.get(f"/v3/clusters/{cluster_id}")
    assert v3.status == 200 and v3.body["driver"] == "rke2" and v3.body["name"] == name
    assert cluster_id in {c["id"] for c in api.get("/v3/clusters").body["data"]}
    v3_pools = api.get(f"/v3/nodepools?clusterId={cluster_id}").body["data"]
    assert {p["hostnamePrefix"] for p in v3_pools} == {f"{name}-workers-", f"{name}-cp-"}

    # GET, in any spelling of the type, and the lists.
    for type_name in ("provisioning.svc.io.clusters", "Provisioning.Svc.Io.Cluster"):
        got = api.get(f"/v1/{type_name}/{NAMESPACE}/{name}")
        assert got.status == 200, got.body
        assert got.body["id"] == f"{NAMESPACE}/{name}"
    got = api.get(f"{TYPE}/{NAMESPACE}/{name}").body
    meta = got["metadata"]
    # The view's version is the Cluster's generation and its pools' digest: not its
    # resourceVersion, which the operator's status writes move too.
    annotations = stored_cluster["metadata"]["annotations"]
    assert meta["resourceVersion"] == (
        f"{stored_cluster['metadata']['generation']}."
        f"{annotations['provisioning.svc.io/pools-hash'][:12]}"
    )
    assert meta["uid"] == stored_cluster["metadata"]["uid"]
    assert meta["state"]["name"] == "pending" and meta["state"]["transitioning"] is True
    assert got["spec"]["kubernetesVersion"] == "v1.36.3"
    assert got["spec"]["rkeConfig"]["networking"] == {"plugin": "canal"}
    assert {p["name"]: p for p in got["spec"]["rkeConfig"]["machinePools"]} == {
        "workers": {**workers, "etcdRole": False, "controlPlaneRole": False},
        "cp": {**control, "drainBeforeDelete": False},
    }
    assert got["status"]["clusterName"] == cluster_id and got["status"]["ready"] is False
    assert "Pending" in {c["type"] for c in got["status"]["conditions"]}
    listed = api.get(TYPE).body
    assert (listed["type"], listed["resourceType"]) == ("collection", "provisioning.svc.io.cluster")
    assert listed["createTypes"] == {"provisioning.svc.io.cluster": url.split(f"/{NAMESPACE}/")[0]}
    assert listed["revision"] and listed["links"]["self"].endswith(TYPE)
    assert f"{NAMESPACE}/{name}" in {c["id"] for c in listed["data"]}
    # Pages of one, with a second cluster (of no pools) there.
    assert create(api, made, body(unique("page"), [])).status == 201
    wait_for("two clusters listed", lambda: api.get(TYPE).body["count"] >= 2, 10)
    first = api.get(f"{TYPE}?limit=1").body
    assert len(first["data"]) == 1 and first["pagination"]["partial"] is True
    following = api.get(f"{TYPE}?limit=1&continue={first['continue']}").body
    assert following["data"][0]["id"] > first["data"][0]["id"]
    in_namespace = api.get(f"{TYPE}/{NAMESPACE}").body["data"]
    assert f"{NAMESPACE}/{name}" in {c["id"] for c in in_namespace}
    assert all(c["metadata"]["namespace"] == NAMESPACE for c in in_namespace)
    # /v3 keeps the view's name: its labels may be put back, not changed or made up.
    labels = v3.body["labels"]
    assert api.put(f"/v3/clusters/{cluster_id}", {"labels": labels}).status == 200
    moved = {**labels, "provisioning.svc.io/name": "other"}
    refused(api.put(f"/v3/clusters/{cluster_id}", {"labels": moved}), 422, "labels")
    forged = api.post("/v3/clusters", {"type": "cluster", "name": "forged", "labels": moved,
                                       "rke2Config": {"kubernetesVersion": "v1.36.3"}})  # fmt: skip
    refused(forged, 422, "labels")
    assert cluster_cr(crs, cluster_id)["metadata"]["labels"] == labels

    # machinePoolName is fixed on the NodePool itself (CEL), whoever writes it.
    np_name = pools["workers"]["metadata"]["name"]
    for patch in ({"spec": {"machinePoolName": "other"}}, {"spec": {"machinePoolName": None}}):
        with pytest.raises(k8s.ApiException) as caught:
            crs.patch_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodepools", np_name,
                                               patch)  # fmt: skip
        assert caught.value.status == 422, patch
    # A second cluster of the same name is refused; another type of /v1 is not served.
    refused(create(api, made, body(name, [])), 409)
    assert api.get(f"/v1/provisioning.svc.io.nodes/{NAMESPACE}/{name}").status == 404

    # DELETE: the cluster and its pools go, as through /v3.
    assert api.delete(f"{TYPE}/{NAMESPACE}/{name}").status == 204
    wait_for("cluster deleted", lambda: cluster_id not in stored(crs), 90)
    wait_for("pools deleted",
             lambda: not crs.list_namespaced_custom_object(GROUP, VERSION, cluster_id,
                                                           "nodepools")["items"], 30)  # fmt: skip
    # Both views read the API server's watch cache, which learns of the deletion after kube.
    wait_for("the cluster gone from /v1 and /v3",
             lambda: api.get(f"{TYPE}/{NAMESPACE}/{name}").status == 404
             and api.get(f"/v3/clusters/{cluster_id}").status == 404, 30)  # fmt: skip


def test_a_put_scales_adds_and_removes_pools_and_a_stale_put_changes_nothing(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str]
) -> None:
    name = unique("put")
    # POST to the namespace's path, the object naming none.
    payload = body(name, [pool("a", template), pool("b", template)])
    del payload["metadata"]["namespace"]
    created = api.post(f"{TYPE}/{NAMESPACE}", payload)
    assert created.status == 201, created.body
    made.append(created.body["status"]["clusterName"])
    assert created.body["id"] == f"{NAMESPACE}/{name}"
    cluster_id = created.body["status"]["clusterName"]
    path = f"{TYPE}/{NAMESPACE}/{name}"
    read = api.get(path).body
    old_version = read["metadata"]["resourceVersion"]
    kept_b = nodepools(crs, cluster_id)["b"]["metadata"]["name"]

    # What a client read, with a pool scaled, one removed and one added.
    changed = put_read(api, path, set_pools([
        pool("b", template, quantity=3),
        pool("c", template, quantity=0, autoscalingMinSize=0, autoscalingMaxSize=2),
    ]))  # fmt: skip
    assert changed.status == 200, changed.body
    new_version = changed.body["metadata"]["resourceVersion"]
    assert new_version != old_version
    pools = nodepools(crs, cluster_id)
    assert set(pools) == {"b", "c"}
    assert pools["b"]["metadata"]["name"] == kept_b and pools["b"]["spec"]["quantity"] == 3
    assert pools["c"]["spec"]["autoscalingMaxSize"] == 2
    assert {p["name"]: p["quantity"] for p in changed.body["spec"]["rkeConfig"]["machinePools"]} \
        == {"b": 3, "c": 0}  # fmt: skip

    # The same PUT at the version read before: 409, and nothing changes.
    before = written(crs, cluster_id)
    stale = {**read, "metadata": {**read["metadata"], "resourceVersion": old_version}}
    stale["spec"]["rkeConfig"]["machinePools"] = [pool("d", template)]
    refused(api.put(path, stale), 409)
    assert written(crs, cluster_id) == before

    # Roles are fixed once a pool exists; the name and namespace too.
    refused(put_read(api, path, set_pools([pool("b", template, etcdRole=True)])), 422,
            "spec.rkeConfig.machinePools[0].etcdRole")  # fmt: skip
    refused(put_read(api, path, lambda read: read["metadata"].update(name="other")), 422,
            "metadata.name")  # fmt: skip
    # A body without machinePools leaves the pools alone.
    assert api.put(path, {"spec": {"kubernetesVersion": "v1.36.3"}}).status == 200
    assert written(crs, cluster_id) == before
    # Without a resourceVersion the update is unconditional.
    anyhow = api.put(path, {"spec": {"rkeConfig": {"machinePools": [pool("b", template)]}}})
    assert anyhow.status == 200, anyhow.body
    assert set(nodepools(crs, cluster_id)) == {"b"}
    assert nodepools(crs, cluster_id)["b"]["spec"]["quantity"] == 1


def test_a_version_put_through_v1_is_the_clusters_roll_and_a_downgrade_changes_nothing(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str]
) -> None:
    created = create(api, made, body(unique("roll"), [pool("a", template)],
                                     kubernetesVersion="v1.35.4"))  # fmt: skip
    assert created.status == 201, created.body
    cluster_id = created.body["status"]["clusterName"]
    path = f"{TYPE}/{NAMESPACE}/{created.body['metadata']['name']}"

    rolled = api.put(path, {"spec": {"kubernetesVersion": "v1.36.3+rke2r1"}})
    assert rolled.status == 200, rolled.body
    spec = cluster_cr(crs, cluster_id)["spec"]
    assert spec["kubernetesVersion"] == "v1.36.3"
    assert spec["rke2Config"]["kubernetesVersion"] == "v1.36.3+rke2r1"
    assert rolled.body["spec"]["kubernetesVersion"] == "v1.36.3"

    before = written(crs, cluster_id)
    refused(api.put(path, {"spec": {"kubernetesVersion": "v1.35.4"}}), 422,
            "spec.kubernetesVersion")  # fmt: skip
    refused(api.put(path, {"spec": {"kubernetesVersion": "v1.99.0"}}), 422,
            "spec.kubernetesVersion")  # fmt: skip
    assert written(crs, cluster_id) == before


@pytest.mark.parametrize(
    ("change", "field", "code"),
    [
        ({"autoscalingMinSize": 3, "autoscalingMaxSize": 2}, "[0].autoscalingMinSize", None),
        ({"autoscalingMinSize": 1}, "[0].autoscalingMaxSize", None),
        ({"quantity": 5, "autoscalingMinSize": 1, "autoscalingMaxSize": 2}, "[0].quantity", None),
        ({"workerRole": False}, "[0].workerRole", None),
        ({"machineConfigRef": {"kind": "NodeTemplate", "name": "nt-nothere"}},
         "[0].machineConfigRef.name", "InvalidReference"),
    ],
)  # fmt: skip
def test_a_bad_pool_is_422_naming_its_field_and_nothing_is_stored(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str],
    change: dict[str, Any], field: str, code: str | None,
) -> None:  # fmt: skip
    before = stored(crs)
    answer = refused(create(api, made, body(unique("bad"), [pool("p", template, **change)])),
                     422, f"spec.rkeConfig.machinePools{field}")  # fmt: skip
    if code is not None:
        assert answer["code"] == code
    assert stored(crs) == before


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"pools": ["same", "same"]}, "spec.rkeConfig.machinePools[1].name"),
        ({"spec": {"rke2Config": {}, "k3sConfig": {}}}, "spec.k3sConfig"),
        ({"spec": {"kubernetesVersion": "v1.34.2"}}, "spec.kubernetesVersion"),
        ({"spec": {"kubernetesVersion": "v1.36.3+k3s1", "rke2Config": {}}},
         "spec.kubernetesVersion"),
        ({"spec": {"rkeConfig": {"networking": {"plugin": "nope"}}}},
         "spec.rkeConfig.networking.plugin"),
    ],
)  # fmt: skip
def test_a_bad_cluster_is_422_naming_its_field_and_nothing_is_stored(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str],
    payload: dict[str, Any], field: str,
) -> None:  # fmt: skip
    pools = [pool(n, template) for n in payload.get("pools", ["p"])]
    request = body(unique("bad"), pools)
    for key, value in payload.get("spec", {}).items():
        if key == "rkeConfig":
            request["spec"]["rkeConfig"] |= value
        else:
            request["spec"][key] = value
    before = stored(crs)
    refused(create(api, made, request), 422, field)
    assert stored(crs) == before


def bind(api: Api, cluster_id: str, person: Person, role: str) -> None:
    granted = api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": cluster_id, "userId": person.id, "roleTemplateId": role},
    )
    assert granted.status == 201, granted.body


def test_another_users_cluster_and_template_are_out_of_reach(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str],
    make_user: Callable[..., Person],
) -> None:  # fmt: skip
    name = unique("private")
    created = create(api, made, body(name, [pool("a", template)]))
    assert created.status == 201, created.body
    cluster_id = created.body["status"]["clusterName"]
    path = f"{TYPE}/{NAMESPACE}/{name}"
    before = written(crs, cluster_id)

    stranger = make_user().api
    assert stranger.get(path).status == 404
    assert f"{NAMESPACE}/{name}" not in {c["id"] for c in stranger.get(TYPE).body["data"]}
    assert stranger.get(TYPE).body["createTypes"] == {}
    refused(stranger.put(path, api.get(path).body), 404)
    refused(stranger.delete(path), 404)
    assert stranger.post(TYPE, body(unique("mine"), [])).status == 403
    assert written(crs, cluster_id) == before

    # A member sees it and may not change it.
    member = make_user()
    bind(api, cluster_id, member, "cluster-member")
    wait_for("the member sees the cluster", lambda: member.api.get(path).status == 200, 10)
    assert "update" not in member.api.get(path).body["links"]
    refused(member.api.put(path, member.api.get(path).body), 403)
    refused(member.api.delete(path), 403)
    assert written(crs, cluster_id) == before

    # An owner of the cluster who is no administrator: they may change its pools, with a
    # template they may use, and not with another user's.
    owner = make_user()
    bind(api, cluster_id, owner, "cluster-owner")
    wait_for("the owner sees the cluster", lambda: owner.api.get(path).status == 200, 10)
    shown = owner.api.get(path).body
    assert shown["links"]["update"] == shown["links"]["self"]
    refused(put_read(owner.api, path, set_pools([pool("a", template, quantity=2)])), 422,
            "spec.rkeConfig.machinePools[0].machineConfigRef.name")  # fmt: skip
    assert written(crs, cluster_id) == before
    own = owner.api.post("/v3/nodetemplates", {"name": "own", "kwokConfig": {"cpu": "1"}})
    assert own.status == 201, own.body
    changed = put_read(owner.api, path, set_pools([pool("a", own.body["id"], quantity=2)]))
    assert changed.status == 200, changed.body
    assert nodepools(crs, cluster_id)["a"]["spec"]["nodeTemplateName"] == own.body["id"]


def test_a_cluster_made_through_v3_shows_in_v1_under_fleet_default(
    api: Api, crs: k8s.CustomObjectsApi, template: str, made: list[str]
) -> None:
    created = api.post("/v3/clusters", {"type": "cluster", "name": "from-v3",
                                        "k3sConfig": {"kubernetesVersion": "v1.35.4"}})  # fmt: skip
    assert created.status == 201, created.body
    cluster_id = created.body["id"]
    made.append(cluster_id)
    path = f"{TYPE}/fleet-default/{cluster_id}"
    wait_for("the v1 view", lambda: api.get(path).status == 200, 10)
    shown = api.get(path).body
    assert shown["id"] == f"fleet-default/{cluster_id}"
    assert shown["spec"]["kubernetesVersion"] == "v1.35.4"
    assert shown["spec"]["k3sConfig"]["networking"] == {"plugin": "flannel"}
    assert shown["spec"]["rkeConfig"]["machinePools"] == []
    assert shown["status"]["clusterName"] == cluster_id
    assert f"fleet-default/{cluster_id}" in {c["id"] for c in api.get(TYPE).body["data"]}

    # Pools added through the view are the v3 cluster's NodePools; the version is admitted as
    # a PUT through /v3 admits it.
    added = put_read(api, path, set_pools([pool("w", template)]))
    assert added.status == 200, added.body
    assert nodepools(crs, cluster_id)["w"]["spec"]["hostnamePrefix"] == f"{cluster_id}-w-"
    assert api.get(f"/v3/nodepools?clusterId={cluster_id}").body["data"][0]["quantity"] == 1
    before = written(crs, cluster_id)
    v3_refusal = api.put(f"/v3/clusters/{cluster_id}", {"kubernetesVersion": "v1.34.2"})
    v1_refusal = refused(
        put_read(api, path, lambda read: read["spec"].update(kubernetesVersion="v1.34.2")),
        v3_refusal.status, "spec.kubernetesVersion",
    )  # fmt: skip
    assert v1_refusal["code"] == v3_refusal.body["code"]
    assert written(crs, cluster_id) == before
    # Deleting it through /v1 deletes the /v3 cluster.
    assert api.delete(path).status == 204
    wait_for("cluster deleted", lambda: cluster_id not in stored(crs), 90)
