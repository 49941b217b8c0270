"""What `/v3/clusters` accepts and stores of an rke2 or k3s cluster (docs/provisioning.md),
checked in the management cluster with the official client. The main stack has no real node,
so a cluster admitted here is never provisioned: nothing is asserted about that."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.provisioning import catalog
from corral.devenv.waiting import wait_for

from .api import Api, Response

GROUP, VERSION = "management.svc.io", "v3"
# Two versions whose images nothing pulls: admission reads the catalog's keys only.
TWO_VERSIONS = catalog.document(
    {
        version: catalog.binaries(
            {name: f"example.test/{name}:{version}" for name in catalog.REQUIRED}
        )
        for version in ("v1.35.4", "v1.36.3")
    }
)


def stored(crs: k8s.CustomObjectsApi) -> set[str]:
    return {
        c["metadata"]["name"]
        for c in crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
    }


@pytest.fixture
def two_versions(setting: Callable[[str, str], None]) -> None:
    setting("kubernetes-version-catalog", TWO_VERSIONS)


@pytest.fixture
def clusters(api: Api, crs: k8s.CustomObjectsApi) -> Iterator[Callable[[dict[str, Any]], Response]]:
    """Creates clusters for one test; deletes those made and waits until they are gone."""
    made: list[str] = []

    def create(body: dict[str, Any]) -> Response:
        response = api.post("/v3/clusters", {"type": "cluster", **body})
        if response.status == 201:
            made.append(response.body["id"])
        return response

    yield create
    for cluster_id in made:
        assert api.delete(f"/v3/clusters/{cluster_id}").status == 204
    wait_for("clusters deleted", lambda: not stored(crs) & set(made), 60)


def refused_and_nothing_stored(
    crs: k8s.CustomObjectsApi, create: Callable[[dict[str, Any]], Response], body: dict[str, Any]
) -> dict[str, Any]:
    before = stored(crs)
    response = create(body)
    assert response.status == 422, response.body
    assert stored(crs) == before
    return dict(response.body)


@pytest.mark.usefixtures("two_versions")
def test_a_version_not_in_the_catalog_is_refused_listing_those_it_has(
    crs: k8s.CustomObjectsApi, clusters: Callable[[dict[str, Any]], Response]
) -> None:
    body = refused_and_nothing_stored(
        crs, clusters, {"name": "old", "rke2Config": {"kubernetesVersion": "v1.34.2+rke2r1"}}
    )
    assert (body["code"], body["fieldName"]) == ("InvalidOption", "rke2Config.kubernetesVersion")
    assert "versions: v1.35.4, v1.36.3" in body["message"]
    body = refused_and_nothing_stored(
        crs, clusters, {"name": "new", "k3sConfig": {}, "kubernetesVersion": "1.37.0"}
    )
    assert (body["code"], body["fieldName"]) == ("InvalidOption", "kubernetesVersion")


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        (
            {
                "rke2Config": {"kubernetesVersion": "v1.36.3"},
                "k3sConfig": {"kubernetesVersion": "v1.36.3"},
            },
            "k3sConfig",
            "InvalidFormat",
        ),
        ({"rke2Config": {}}, "rke2Config.kubernetesVersion", "MissingRequired"),
        ({"rke2Config": "v1.36.3"}, "rke2Config", "InvalidFormat"),
        (
            {"rke2Config": {"kubernetesVersion": "v1.36.3", "networking": {"plugin": "flannel"}}},
            "rke2Config.networking.plugin",
            "InvalidOption",
        ),
        (
            {"k3sConfig": {"kubernetesVersion": "v1.36.3", "networking": {"plugin": "cilium"}}},
            "k3sConfig.networking.plugin",
            "InvalidOption",
        ),
        (
            {"k3sConfig": {"kubernetesVersion": "v1.36.3+rke2r1"}},
            "k3sConfig.kubernetesVersion",
            "InvalidFormat",
        ),
        (
            {"rke2Config": {}, "kubernetesVersion": "v1.36.3+k3s1"},
            "kubernetesVersion",
            "InvalidFormat",
        ),
        (
            {"rke2Config": {"kubernetesVersion": "v1.36.3"}, "kubernetesVersion": "v1.35.4"},
            "rke2Config.kubernetesVersion",
            "InvalidFormat",
        ),
        (
            {"rke2Config": {"kubernetesVersion": "v1.36.3", "extra": "x" * 70_000}},
            "rke2Config",
            "InvalidFormat",
        ),
    ],
)
@pytest.mark.usefixtures("two_versions")
def test_a_bad_configuration_is_refused_naming_its_field(
    crs: k8s.CustomObjectsApi,
    clusters: Callable[[dict[str, Any]], Response],
    body: dict[str, Any],
    field: str,
    code: str,
) -> None:
    refused = refused_and_nothing_stored(crs, clusters, {"name": "bad", **body})
    assert (refused["code"], refused["fieldName"]) == (code, field), refused


@pytest.mark.usefixtures("two_versions")
def test_an_rke2_cluster_stores_the_catalog_key_and_the_default_plugin(
    api: Api, crs: k8s.CustomObjectsApi, clusters: Callable[[dict[str, Any]], Response]
) -> None:
    config = {"kubernetesVersion": "v1.36.3+rke2r1", "etcd": {"snapshotRetention": 5}}
    created = clusters({"name": "hosted", "rke2Config": config})
    assert created.status == 201, created.body
    assert (created.body["driver"], created.body["kubernetesVersion"]) == ("rke2", "v1.36.3")
    spec = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", created.body["id"])["spec"]
    assert spec["kubernetesVersion"] == "v1.36.3"
    assert spec["rke2Config"] == {**config, "networking": {"plugin": "canal"}}
    shown = api.get(f"/v3/clusters/{created.body['id']}").body
    assert shown["kubernetesVersion"] == "v1.36.3"
    assert shown["spec"]["rke2Config"]["kubernetesVersion"] == "v1.36.3+rke2r1"


@pytest.mark.usefixtures("two_versions")
def test_a_k3s_cluster_takes_the_top_level_version_and_flannel(
    crs: k8s.CustomObjectsApi, clusters: Callable[[dict[str, Any]], Response]
) -> None:
    created = clusters({"name": "small", "k3sConfig": {}, "kubernetesVersion": "1.35.4"})
    assert created.status == 201, created.body
    spec = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", created.body["id"])["spec"]
    assert spec["kubernetesVersion"] == "v1.35.4"
    assert spec["k3sConfig"] == {"kubernetesVersion": "1.35.4", "networking": {"plugin": "flannel"}}


@pytest.mark.usefixtures("two_versions")
def test_the_version_of_a_provisioned_cluster_goes_up_one_minor_in_the_catalog_only(
    api: Api, crs: k8s.CustomObjectsApi, clusters: Callable[[dict[str, Any]], Response]
) -> None:
    created = clusters({"name": "moving", "rke2Config": {"kubernetesVersion": "v1.35.4"}})
    assert created.status == 201, created.body
    path = f"/v3/clusters/{created.body['id']}"

    def spec() -> dict[str, Any]:
        return dict(
            crs.get_cluster_custom_object(GROUP, VERSION, "clusters", created.body["id"])["spec"]
        )

    before = spec()
    unknown = api.put(path, {"kubernetesVersion": "v1.36.4", "description": "unknown"})
    assert (unknown.status, unknown.body["code"]) == (422, "InvalidOption"), unknown.body
    assert unknown.body["fieldName"] == "kubernetesVersion"
    assert "versions: v1.35.4, v1.36.3" in unknown.body["message"]
    plugin = api.put(
        path, {"rke2Config": {"kubernetesVersion": "v1.36.3", "networking": {"plugin": "cilium"}}}
    )
    assert (plugin.status, plugin.body["code"]) == (422, "InvalidAction")
    assert spec() == before
    # What a client read, put back: the same version, however written, is no change.
    same = api.put(path, {"kubernetesVersion": "1.35.4+rke2r9", "description": "same"})
    assert same.status == 200, same.body
    assert spec() == {**before, "description": "same"}

    # While a restore runs (asked as kubectl would), the version stays: 409.
    restoring = {"etcdSnapshotRestore": {"name": "b", "generation": 1, "restoreRKEConfig": ""}}
    crs.patch_cluster_custom_object(GROUP, VERSION, "clusters", created.body["id"],
                                    {"spec": restoring})  # fmt: skip
    busy = api.put(path, {"kubernetesVersion": "v1.36.3"})
    assert (busy.status, busy.body["code"]) == (409, "Conflict"), busy.body
    assert "restore" in busy.body["message"]
    assert spec()["kubernetesVersion"] == "v1.35.4"
    crs.patch_cluster_custom_object(GROUP, VERSION, "clusters", created.body["id"],
                                    {"spec": {"etcdSnapshotRestore": None}})  # fmt: skip

    # One minor up is admitted: the spec and the configuration name the new version (this
    # stack has no real node, so nothing rolls; tests/e2e/test_provisioning.py rolls one).
    moved = api.put(path, {"kubernetesVersion": "v1.36.3+rke2r1"})
    assert moved.status == 200, moved.body
    assert moved.body["kubernetesVersion"] == "v1.36.3"
    assert spec()["kubernetesVersion"] == "v1.36.3"
    assert spec()["rke2Config"]["kubernetesVersion"] == "v1.36.3+rke2r1"
    down = api.put(path, {"kubernetesVersion": "v1.35.4", "description": "downgraded"})
    assert (down.status, down.body["code"]) == (422, "InvalidOption"), down.body
    assert "cannot go down from v1.36.3 to v1.35.4" in down.body["message"]
    assert spec()["kubernetesVersion"] == "v1.36.3" and spec()["description"] == "same"


def test_the_schema_says_what_a_configuration_accepts(api: Api) -> None:
    fields = api.get("/v3/schemas/cluster").body["resourceFields"]
    assert "canal, none" in fields["rke2Config"]["description"]
    assert "flannel, none" in fields["k3sConfig"]["description"]


@pytest.mark.usefixtures("two_versions")
def test_another_users_cluster_actions_and_etcd_backups_are_invisible_and_untouchable(
    api: Api,
    crs: k8s.CustomObjectsApi,
    clusters: Callable[[dict[str, Any]], Response],
    make_user: Callable[..., Any],
) -> None:
    created = clusters({"name": "private", "rke2Config": {"kubernetesVersion": "v1.36.3"}})
    assert created.status == 201, created.body
    cluster_id = created.body["id"]
    # A backup record as the API would make it. With no real node here its Job never runs:
    # the cluster's deletion at teardown then proves a backup under way does not hold it up.
    backup = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EtcdBackup",
        "metadata": {"name": f"{cluster_id}-20261124000000"},
        "spec": {"clusterId": cluster_id, "manual": True},
    }
    wait_for(
        "the cluster's namespace",
        lambda: crs.create_namespaced_custom_object(GROUP, VERSION, cluster_id, "etcdbackups",
                                                    backup),
        30,
    )  # fmt: skip
    backup_id = f"{cluster_id}:{backup['metadata']['name']}"
    # Written past the API, it is read once its watch event has reached the API's cache.
    wait_for("the backup in the cache", lambda: api.get(f"/v3/etcdbackups/{backup_id}").status
             == 200, 30)  # fmt: skip
    assert backup_id in {b["id"] for b in api.get("/v3/etcdbackups").body["data"]}
    spec_before = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster_id)["spec"]

    stranger = make_user().api
    assert backup_id not in {b["id"] for b in stranger.get("/v3/etcdbackups").body["data"]}
    assert stranger.get(f"/v3/etcdbackups/{backup_id}").status == 404
    assert stranger.delete(f"/v3/etcdbackups/{backup_id}").status == 404
    for name, body in (
        ("backupEtcd", {}),
        ("restoreFromEtcdBackup", {"etcdBackupName": backup["metadata"]["name"]}),
        ("rotateCertificates", {"services": ["kube-apiserver"]}),
    ):
        answer = stranger.post(f"/v3/clusters/{cluster_id}?action={name}", body)
        assert answer.status == 404, (name, answer.body)
    # Malformed ids are not found, whatever they hold.
    for bad in ("no-colon", f"{cluster_id}:", ":x", "a" * 600):
        assert api.get(f"/v3/etcdbackups/{bad}").status == 404, bad

    assert api.get(f"/v3/etcdbackups/{backup_id}").status == 200
    assert crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster_id)["spec"] == (
        spec_before
    )


# A catalog whose version has the uploader of S3 targets (etcd-s3), and one without.
WITH_S3 = catalog.document(
    {
        "v1.36.3": catalog.binaries(
            {n: f"example.test/{n}:v1.36.3" for n in (*catalog.REQUIRED, catalog.ETCD_S3)}
        )
    }
)


def test_an_s3_target_needs_an_s3_credential_and_a_version_that_can_upload(
    api: Api,
    crs: k8s.CustomObjectsApi,
    clusters: Callable[[dict[str, Any]], Response],
    setting: Callable[[str, str], None],
) -> None:
    lacking = api.post("/v3/cloudcredentials", {"s3credentialConfig": {"accessKey": "AK"}})
    assert lacking.status == 422, lacking.body
    assert (lacking.body["code"], lacking.body["fieldName"]) == (
        "MissingRequired", "s3credentialConfig.secretKey")  # fmt: skip
    secret_key = "never-shown-0123456789"
    keys = {"accessKey": "AK", "secretKey": secret_key}
    made = api.post("/v3/cloudcredentials", {"name": "backups", "s3credentialConfig": keys})
    assert made.status == 201, made.body
    credential = made.body["id"]
    assert made.body["driver"] == "s3" and "nodeDriver" not in made.body["links"]
    assert secret_key not in str(api.get(f"/v3/cloudcredentials/{credential}").body)
    kwok = api.post("/v3/cloudcredentials", {"kwokcredentialConfig": {}})
    assert kwok.status == 201, kwok.body

    target = {"endpoint": "10.1.0.1:9000", "bucket": "etcd", "cloudCredentialName": credential}
    setting("kubernetes-version-catalog", WITH_S3)
    for block, field, code in (
        ({**target, "bucket": "No"}, "bucket", "InvalidFormat"),
        ({**target, "cloudCredentialName": "cc-nosuch"}, "cloudCredentialName", "InvalidReference"),
        ({**target, "cloudCredentialName": kwok.body["id"]}, "cloudCredentialName",
         "InvalidReference"),
        ({**target, "accessKey": "AK"}, "accessKey", "InvalidBodyContent"),
    ):  # fmt: skip
        body = {"name": "s3", "rke2Config": {"kubernetesVersion": "v1.36.3", "etcd": {"s3": block}}}
        refused = refused_and_nothing_stored(crs, clusters, body)
        assert (refused["code"], refused["fieldName"]) == (code, f"rke2Config.etcd.s3.{field}")
    # Through /v1, under spec.
    no_bucket = {"etcd": {"s3": {**target, "bucket": ""}}}
    v1_body = {"metadata": {"namespace": "team-s3", "name": "s3"},
               "spec": {"kubernetesVersion": "v1.36.3", "rke2Config": no_bucket}}  # fmt: skip
    refused = api.post("/v1/provisioning.svc.io.clusters", v1_body)
    assert refused.status == 422, refused.body
    assert refused.body["fieldName"] == "spec.rke2Config.etcd.s3.bucket"

    created = clusters({"name": "s3", "rke2Config": {"kubernetesVersion": "v1.36.3",
                                                     "etcd": {"s3": target}}})  # fmt: skip
    assert created.status == 201, created.body
    spec = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", created.body["id"])["spec"]
    assert spec["rke2Config"]["etcd"]["s3"] == target

    # A version whose catalog entry has no etcd-s3 cannot have a target.
    setting("kubernetes-version-catalog", TWO_VERSIONS)
    body = {
        "name": "s3-old",
        "rke2Config": {"kubernetesVersion": "v1.36.3", "etcd": {"s3": target}},
    }
    refused = refused_and_nothing_stored(crs, clusters, body)
    assert refused["fieldName"] == "rke2Config.etcd.s3" and "etcd-s3" in refused["message"]
    for cc in (credential, kwok.body["id"]):
        assert api.delete(f"/v3/cloudcredentials/{cc}").status == 204
