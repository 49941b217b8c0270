"""corral's read-modify-writes while their object's status is written in a loop, as the
operator (or a downstream controller) does under load (issue #22, item 8): each update must
land, whatever the status writes do to the object's resourceVersion. A writer thread patches
the status subresource with the official client (a condition's message, over and over) while
the test drives corral through HTTP; a conditional /v1 PUT at the version read still lands,
and one at a version whose spec someone else changed still gets 409 and writes nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.api import names
from corral.core.provisioning import catalog
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .test_projects import create_namespace, create_project, unique
from .test_provisioning_v1 import cluster_cr, nodepools, pool, refused, written

GROUP, VERSION = names.GROUP, names.VERSION
V1 = "/v1/provisioning.svc.io.clusters"
NAMESPACE = "team-rmw"
# Patch releases one after another, each admitted over the last (nothing pulls the images).
PATCHES = [f"v1.35.{n}" for n in range(1, 13)]
VERSIONS = catalog.document(
    {
        version: catalog.binaries(
            {name: f"example.test/{name}:{version}" for name in catalog.REQUIRED}
        )
        for version in PATCHES
    }
)
# The custom objects' client would send a merge patch otherwise.
JSON_PATCH = "application/json-patch+json"


class StatusWriter:
    """Writes `write(n)` for n = 0, 1, … in a thread until the block ends; counts the writes
    that landed. Each write is a status write with a client of its own. The block starts once
    writes land, and must end with writes still landing: the requests in it ran while the
    object's resourceVersion kept moving."""

    def __init__(self, write: Callable[[int], None]) -> None:
        self._write = write
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.writes = 0
        self._entered = 0

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                self._write(n)
            except k8s.ApiException:
                continue  # the object mid-change (a condition list rewritten): write again
            self.writes += 1

    def __enter__(self) -> StatusWriter:
        self._thread.start()
        wait_for("the first status writes", lambda: self.writes >= 3, 10)
        self._entered = self.writes
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            wait_for("status writes during the block",
                     lambda: self.writes > self._entered, 10)  # fmt: skip
        self._stop.set()
        self._thread.join(10)


def touch_condition(n: int) -> list[dict[str, Any]]:
    """The JSON patch of a status write: the first condition's message, changed."""
    return [{"op": "replace", "path": "/status/conditions/0/message", "value": f"touched {n}"}]


@pytest.fixture(scope="module")
def writer_crs(stack: Environment) -> k8s.CustomObjectsApi:
    """The management cluster for the writer thread: a client of its own, as the operator's."""
    return k8s.CustomObjectsApi(
        k8s_config.new_client_from_config(config_file=str(stack.management_kubeconfig))
    )


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture
def versions(setting: Callable[[str, str], None]) -> None:
    setting("kubernetes-version-catalog", VERSIONS)


@pytest.fixture(scope="module")
def template(api: Api) -> Iterator[str]:
    """One template for the module's pools: it can go only once their clusters have, which is
    awaited once, at the module's end, rather than after every test."""
    made = api.post("/v3/nodetemplates", {"name": "rmw", "kwokConfig": {"cpu": "2"}})
    assert made.status == 201, made.body
    yield made.body["id"]
    wait_for("template deleted",
             lambda: api.delete(f"/v3/nodetemplates/{made.body['id']}").status in (204, 404),
             90)  # fmt: skip


@pytest.fixture
def provisioned(
    api: Api, crs: k8s.CustomObjectsApi, versions: None, template: str
) -> Iterator[tuple[str, str]]:
    """A cluster made through /v1 with one machine pool, stored only (no real node comes):
    its view's path and its id, once the operator has written its conditions."""
    name = unique("rmw")
    made = api.post(V1, {
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"kubernetesVersion": PATCHES[0], "rkeConfig": {"machinePools": [
            pool("workers", template)]}},
    })  # fmt: skip
    assert made.status == 201, made.body
    cluster_id = made.body["status"]["clusterName"]
    wait_for("the cluster's conditions",
             lambda: cluster_cr(crs, cluster_id).get("status", {}).get("conditions"),
             30)  # fmt: skip
    yield f"{V1}/{NAMESPACE}/{name}", cluster_id
    assert api.delete(f"/v3/clusters/{cluster_id}").status in (204, 404)
    wait_for("cluster deleted", lambda: gone(crs, cluster_id), 90)


def gone(crs: k8s.CustomObjectsApi, cluster_id: str) -> bool:
    try:
        cluster_cr(crs, cluster_id)
    except k8s.ApiException as exc:
        return exc.status == 404
    return False


def cluster_status_writer(writer_crs: k8s.CustomObjectsApi, cluster_id: str) -> StatusWriter:
    return StatusWriter(lambda n: writer_crs.patch_cluster_custom_object_status(
        GROUP, VERSION, "clusters", cluster_id, touch_condition(n),
        _content_type=JSON_PATCH))  # fmt: skip


def test_unconditional_cluster_updates_land_while_its_status_is_written(
    api: Api, crs: k8s.CustomObjectsApi, writer_crs: k8s.CustomObjectsApi,
    provisioned: tuple[str, str], template: str,
) -> None:  # fmt: skip
    path, cluster_id = provisioned
    with cluster_status_writer(writer_crs, cluster_id):
        # A version through /v1 with nothing else, the request of the issue; then through /v3.
        for version in PATCHES[1:6]:
            rolled = api.put(path, {"spec": {"kubernetesVersion": version}})
            assert rolled.status == 200, rolled.body
            assert cluster_cr(crs, cluster_id)["spec"]["kubernetesVersion"] == version
        for version in PATCHES[6:11]:
            rolled = api.put(f"/v3/clusters/{cluster_id}", {"kubernetesVersion": version})
            assert rolled.status == 200, rolled.body
            assert cluster_cr(crs, cluster_id)["spec"]["kubernetesVersion"] == version
        described = api.put(f"/v3/clusters/{cluster_id}", {"description": "under load"})
        assert described.status == 200, described.body
        # The pools through /v1, and one of them through /v3/nodepools.
        for quantity in (2, 3):
            pools = [pool("workers", template, quantity=quantity)]
            scaled = api.put(path, {"spec": {"rkeConfig": {"machinePools": pools}}})
            assert scaled.status == 200, scaled.body
            assert nodepools(crs, cluster_id)["workers"]["spec"]["quantity"] == quantity
        np = nodepools(crs, cluster_id)["workers"]["metadata"]["name"]
        again = api.put(f"/v3/nodepools/{cluster_id}:{np}", {"quantity": 1})
        assert again.status == 200, again.body
    spec = cluster_cr(crs, cluster_id)["spec"]
    assert (spec["kubernetesVersion"], spec["description"]) == (PATCHES[10], "under load")
    assert spec["rke2Config"]["kubernetesVersion"] == PATCHES[10]
    assert nodepools(crs, cluster_id)["workers"]["spec"]["quantity"] == 1


def test_a_conditional_v1_put_is_stale_only_when_the_spec_moved(
    api: Api, crs: k8s.CustomObjectsApi, writer_crs: k8s.CustomObjectsApi,
    provisioned: tuple[str, str],
) -> None:  # fmt: skip
    path, cluster_id = provisioned
    read = api.get(path).body
    with cluster_status_writer(writer_crs, cluster_id):
        # The status writes move the Cluster's resourceVersion, not the view's.
        moved = cluster_cr(crs, cluster_id)["metadata"]["resourceVersion"]
        wait_for("a status write after the read",
                 lambda: cluster_cr(crs, cluster_id)["metadata"]["resourceVersion"] != moved,
                 10)  # fmt: skip
        assert api.get(path).body["metadata"]["resourceVersion"] == read["metadata"][
            "resourceVersion"]  # fmt: skip
        read["spec"]["kubernetesVersion"] = PATCHES[1]
        read["spec"]["rkeConfig"]["machinePools"][0]["quantity"] = 2
        put = api.put(path, read)
        assert put.status == 200, put.body
        assert put.body["metadata"]["resourceVersion"] != read["metadata"]["resourceVersion"]
        assert cluster_cr(crs, cluster_id)["spec"]["kubernetesVersion"] == PATCHES[1]
        assert nodepools(crs, cluster_id)["workers"]["spec"]["quantity"] == 2

        # Read, then someone else changes the spec through /v3: the read is stale.
        stale = api.get(path).body
        assert api.put(f"/v3/clusters/{cluster_id}", {"description": "moved"}).status == 200
        before = written(crs, cluster_id)
        stale["spec"]["kubernetesVersion"] = PATCHES[2]
        stale["spec"]["rkeConfig"]["machinePools"][0]["quantity"] = 3
        refused(api.put(path, stale), 409)
        assert written(crs, cluster_id) == before
        # Read again, it lands.
        fresh = api.get(path).body
        fresh["spec"]["kubernetesVersion"] = PATCHES[2]
        assert api.put(path, fresh).status == 200
    assert cluster_cr(crs, cluster_id)["spec"]["kubernetesVersion"] == PATCHES[2]


def test_a_restore_request_lands_while_the_clusters_status_is_written(
    api: Api, crs: k8s.CustomObjectsApi, writer_crs: k8s.CustomObjectsApi,
    provisioned: tuple[str, str],
) -> None:  # fmt: skip
    _, cluster_id = provisioned
    # A completed backup of the cluster, as the operator records one.
    backup = f"{cluster_id}-rmw"
    crs.create_namespaced_custom_object(GROUP, VERSION, cluster_id, "etcdbackups", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "EtcdBackup",
        "metadata": {"name": backup, "namespace": cluster_id},
        "spec": {"clusterId": cluster_id, "manual": True},
    })  # fmt: skip
    crs.patch_namespaced_custom_object_status(GROUP, VERSION, cluster_id, "etcdbackups", backup, {
        "status": {"conditions": [{"type": "Completed", "status": "True", "reason": "Taken",
                                   "message": "", "lastTransitionTime": "2026-11-28T00:00:00Z"}],
                   "filename": f"{backup}.db"},
    })  # fmt: skip
    wait_for("the backup listed",
             lambda: api.get(f"/v3/etcdbackups/{cluster_id}:{backup}").status == 200,
             10)  # fmt: skip
    with cluster_status_writer(writer_crs, cluster_id):
        restored = api.post(f"/v3/clusters/{cluster_id}?action=restoreFromEtcdBackup",
                            {"etcdBackupName": backup})  # fmt: skip
        assert restored.status == 201, restored.body
    asked = cluster_cr(crs, cluster_id)["spec"]["etcdSnapshotRestore"]
    assert (asked["name"], asked["generation"]) == (backup, 1)


def test_project_quota_changes_and_reservations_land_while_its_status_is_written(
    api: Api, crs: k8s.CustomObjectsApi, writer_crs: k8s.CustomObjectsApi, cluster: str
) -> None:
    project = create_project(api, cluster, resourceQuota={"limit": {"pods": "10"}},
                             namespaceDefaultResourceQuota={"limit": {"pods": "2"}})  # fmt: skip
    pid = project["id"].split(":")[1]

    def stored() -> dict[str, Any]:
        return dict(crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "projects", pid))

    wait_for("the project's conditions", lambda: stored().get("status", {}).get("conditions"), 30)
    namespaces: list[str] = []
    try:
        with StatusWriter(lambda n: writer_crs.patch_namespaced_custom_object_status(
                GROUP, VERSION, cluster, "projects", pid, touch_condition(n),
                _content_type=JSON_PATCH)):  # fmt: skip
            for pods in (11, 12, 13, 14):
                changed = api.put(f"/v3/projects/{project['id']}",
                                  {"resourceQuota": {"limit": {"pods": str(pods)}}})  # fmt: skip
                assert changed.status == 200, changed.body
                assert stored()["spec"]["resourceQuota"]["limit"]["pods"] == str(pods)
            for _ in range(2):
                # A namespace entering a quota'd project reserves room on the Project first.
                made = create_namespace(api, cluster, project["id"])
                assert made.status == 201, made.body
                namespaces.append(made.body["name"])
        # Each reservation was taken off again once its namespace was in.
        annotations = stored()["metadata"].get("annotations") or {}
        assert not [k for k in annotations if k.startswith("reservation.management.svc.io/")]
    finally:
        for name in namespaces:
            api.delete(f"/v3/clusters/{cluster}/namespaces/{name}")
        assert api.delete(f"/v3/projects/{project['id']}").status in (204, 404)


def test_workload_updates_land_while_its_status_is_written(
    api: Api, cluster: str, downstream: k8s.ApiClient, stack: Environment
) -> None:
    project = create_project(api, cluster)["id"]
    made_ns = create_namespace(api, cluster, project)
    assert made_ns.status == 201, made_ns.body
    namespace = made_ns.body["name"]
    made = api.post(f"/v3/projects/{project}/workloads", {
        "type": "workload", "workloadType": "deployment", "name": "rmw", "namespaceId": namespace,
        "scale": 1, "containers": [{"name": "app", "image": "registry.example/app:1.0"}],
    })  # fmt: skip
    assert made.status == 201, made.body
    wid = made.body["id"]
    apps = k8s.AppsV1Api(downstream)
    writer = k8s.AppsV1Api(
        k8s_config.new_client_from_config(config_file=str(stack.downstream_kubeconfigs()[0]))
    )
    wait_for("the deployment's conditions",
             lambda: apps.read_namespaced_deployment("rmw", namespace).status.conditions,
             30)  # fmt: skip
    try:
        with StatusWriter(lambda n: writer.patch_namespaced_deployment_status(
                "rmw", namespace, touch_condition(n), _content_type=JSON_PATCH)):  # fmt: skip
            for scale in (2, 3, 4, 5):
                scaled = api.put(f"/v3/projects/{project}/workloads/{wid}", {"scale": scale})
                assert scaled.status == 200, scaled.body
                assert apps.read_namespaced_deployment("rmw", namespace).spec.replicas == scale
    finally:
        api.delete(f"/v3/projects/{project}/workloads/{wid}")
        api.delete(f"/v3/clusters/{cluster}/namespaces/{namespace}")
        api.delete(f"/v3/projects/{project}")
