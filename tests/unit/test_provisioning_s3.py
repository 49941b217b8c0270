"""S3 targets of etcd backups: the `etcd.s3` block, the credential kind, the Jobs' upload and
download containers, and where a backup says it is."""

from __future__ import annotations

from typing import Any

import pytest

from corral.core.errors import Invalid
from corral.core.provisioning import admission, backups, catalog, s3
from corral.core.provisioning.flavours import RKE2

from .test_provisioning_manifests import ADDRESSES, plan

CLUSTER = "c-m-abc"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
BLOCK = {
    "endpoint": "10.1.0.1:9000",
    "bucket": "etcd-backups",
    "folder": "/team/a/",
    "region": "eu-west-1",
    "endpointCA": CA,
    "cloudCredentialName": "cc-abcde",
}


def versions(with_s3: bool = True) -> catalog.Catalog:
    names = (*catalog.REQUIRED, catalog.ETCD_S3) if with_s3 else catalog.REQUIRED
    return catalog.parse(
        catalog.document({"v1.36.3": catalog.binaries({n: f"x/{n}:1" for n in names})})
    )


def config(**s3_fields: Any) -> dict[str, Any]:
    return {"kubernetesVersion": "v1.36.3+rke2r1", "etcd": {"s3": {**BLOCK, **s3_fields}}}


def refusal(given: dict[str, Any], with_s3: bool = True) -> Invalid:
    with pytest.raises(Invalid) as raised:
        admission.admit(RKE2, given, None, versions(with_s3))
    return raised.value


def test_a_cluster_without_a_target_has_none() -> None:
    assert s3.target({}, "rke2Config") is None
    assert s3.target({"etcd": {}}, "rke2Config") is None
    assert s3.cluster_target({"rke2Config": {"kubernetesVersion": "v1"}}) is None


def test_the_block_is_stored_as_given_and_read_with_the_folder_trimmed() -> None:
    admitted = admission.admit(RKE2, config(), None, versions())
    assert admitted.config["etcd"]["s3"] == BLOCK
    target = s3.cluster_target({"rke2Config": admitted.config})
    assert target == s3.Target(
        "10.1.0.1:9000", "etcd-backups", "team/a", "eu-west-1", CA, False, "cc-abcde"
    )
    assert target.location("b1.db") == "s3://etcd-backups/team/a/b1.db"
    assert s3.Target("h", "bkt", "", "", "", True, "cc").location("b1.db") == "s3://bkt/b1.db"


@pytest.mark.parametrize(
    ("fields", "field", "code"),
    [
        ({"endpoint": None}, "endpoint", "MissingRequired"),
        ({"endpoint": "https://s3.example.com"}, "endpoint", "InvalidFormat"),
        ({"endpoint": "s3.example.com/path"}, "endpoint", "InvalidFormat"),
        ({"endpoint": "host:99999"}, "endpoint", "InvalidFormat"),
        ({"endpoint": "a" * 256}, "endpoint", "InvalidFormat"),
        ({"bucket": ""}, "bucket", "MissingRequired"),
        ({"bucket": "Upper"}, "bucket", "InvalidFormat"),
        ({"bucket": "ab"}, "bucket", "InvalidFormat"),
        ({"bucket": 7}, "bucket", "InvalidFormat"),
        ({"folder": "a/../b"}, "folder", "InvalidFormat"),
        ({"folder": "a//b"}, "folder", "InvalidFormat"),
        ({"folder": "a\\b"}, "folder", "InvalidFormat"),
        ({"folder": "f" * 257}, "folder", "InvalidFormat"),
        ({"region": "EU West"}, "region", "InvalidFormat"),
        ({"endpointCA": "not a certificate"}, "endpointCA", "InvalidFormat"),
        ({"endpointCA": CA + "x" * s3.MAX_CA}, "endpointCA", "InvalidFormat"),
        ({"skipSSLVerify": "yes"}, "skipSSLVerify", "InvalidFormat"),
        ({"cloudCredentialName": None}, "cloudCredentialName", "MissingRequired"),
        ({"cloudCredentialName": "c" * 65}, "cloudCredentialName", "InvalidFormat"),
        ({"secretKey": "inline"}, "secretKey", "InvalidBodyContent"),
    ],
)
def test_each_field_is_checked_and_named(fields: dict[str, Any], field: str, code: str) -> None:
    refused = refusal(config(**fields))
    # No code is the API's InvalidFormat.
    assert (refused.field, refused.code or "InvalidFormat") == (f"rke2Config.etcd.s3.{field}", code)
    # A refusal never repeats a value it was given (a misplaced key must not be echoed).
    assert "inline" not in refused.message


def test_the_block_must_be_objects_and_the_version_must_have_the_uploader() -> None:
    version = {"kubernetesVersion": "v1.36.3"}
    assert refusal({**version, "etcd": "s3"}).field == "rke2Config.etcd"
    assert refusal({**version, "etcd": {"s3": []}}).field == "rke2Config.etcd.s3"
    refused = refusal(config(), with_s3=False)
    assert refused.field == "rke2Config.etcd.s3"
    assert "etcd-s3" in refused.message


def test_the_credential_must_exist_and_be_of_the_s3_kind() -> None:
    target = s3.cluster_target({"rke2Config": config()})
    assert target is not None
    with pytest.raises(Invalid) as raised:
        s3.check_credential(None, target, "rke2Config.etcd.s3")
    assert raised.value.field == "rke2Config.etcd.s3.cloudCredentialName"
    assert raised.value.code == "InvalidReference"
    with pytest.raises(Invalid):
        s3.check_credential({"spec": {"driver": "kwok"}}, target, "rke2Config.etcd.s3")
    s3.check_credential({"spec": {"driver": "s3"}}, target, "rke2Config.etcd.s3")


def test_the_jobs_secret_holds_the_keys_and_ca_and_goes_with_the_job() -> None:
    target = s3.cluster_target({"rke2Config": config()})
    assert target is not None
    data = s3.job_secret_data({"accessKey": "AK", "secretKey": "SK"}, target)
    assert data == {"accessKey": "AK", "secretKey": "SK", "ca.crt": CA}
    with pytest.raises(Invalid) as raised:
        s3.job_secret_data({"accessKey": "AK"}, target)
    assert "secretKey" in raised.value.message
    secret = backups.s3_secret(CLUSTER, "etcd-snapshot-b1", "uid-1", data)
    assert secret["metadata"]["name"] == "etcd-snapshot-b1-s3"
    assert secret["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "etcd-snapshot-b1", "uid": "uid-1"}
    ]


def test_the_snapshot_job_uploads_between_the_save_and_the_status_with_no_key_in_it() -> None:
    target = s3.cluster_target({"rke2Config": config(skipSSLVerify=True)})
    release = versions().release("v1.36.3")
    job = backups.snapshot_job(CLUSTER, "b1", release, ADDRESSES.etcd_ip, target)
    spec = job["spec"]["template"]["spec"]
    save, upload = spec["initContainers"]
    assert save["name"] == "save"
    assert upload["image"] == "x/etcd-s3:1"
    assert upload["command"] == [
        "/usr/local/bin/etcd-s3", "upload", "--endpoint=10.1.0.1:9000", "--bucket=etcd-backups",
        "--key=team/a/b1.db", "--credentials=/s3", "--file=/backups/b1.db",
        "--region=eu-west-1", "--ca=/s3/ca.crt", "--skip-ssl-verify",
    ]  # fmt: skip
    assert "env" not in upload
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["s3"]["secret"] == {"secretName": "etcd-snapshot-b1-s3", "defaultMode": 0o400}
    mounts = {m["name"]: m for m in upload["volumeMounts"]}
    assert mounts["s3"]["readOnly"] and mounts["backups"]["readOnly"]
    # Without a target the Job is as before: no upload, no Secret.
    plain = backups.snapshot_job(CLUSTER, "b1", release, ADDRESSES.etcd_ip)
    assert [c["name"] for c in plain["spec"]["template"]["spec"]["initContainers"]] == ["save"]


def test_the_restore_of_an_s3_backup_downloads_and_checks_the_hash_first() -> None:
    target = s3.cluster_target({"rke2Config": config()})
    the_plan = plan(release=versions().release("v1.36.3"))
    job = backups.restore_job(the_plan, "b1", 3, target, "ab" * 32)
    spec = job["spec"]["template"]["spec"]
    (download,), restore = spec["initContainers"], spec["containers"][0]
    assert download["command"][1:3] == ["download", "--endpoint=10.1.0.1:9000"]
    assert "--file=/downloads/b1.db" in download["command"]
    assert f"--sha256={'ab' * 32}" in download["command"]
    assert restore["command"][restore["command"].index("restore") + 1] == "/downloads/b1.db"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["s3"]["secret"]["secretName"] == "etcd-restore-3-s3"
    assert "emptyDir" in volumes["downloads"]


def test_a_backup_in_s3_records_its_target_without_keys_and_is_read_back() -> None:
    target = s3.cluster_target({"rke2Config": config()})
    assert target is not None
    described = target.described()
    assert "secretKey" not in described and "accessKey" not in described
    status = {"location": target.location("b1.db"), "s3": {**described, "size": 42}}
    assert s3.recorded(status) == target
    assert s3.recorded({"location": "pvc://c/etcd-backups/b1.db"}) is None


def test_the_uploaders_line_is_read() -> None:
    log = 'noise\n{"size": 20512, "sha256": "00ff", "etag": "x"}\n'
    assert backups.uploaded(log) == (20512, "00ff")
    with pytest.raises(ValueError, match="no JSON"):
        backups.uploaded("error")


def test_a_deleted_backups_object_is_removed_by_a_job_of_its_own() -> None:
    target = s3.cluster_target({"rke2Config": config()})
    assert target is not None
    job = backups.s3_delete_job(CLUSTER, "b1", versions().release("v1.36.3"), target)
    assert job["metadata"]["name"] == "etcd-s3-delete-b1"
    spec = job["spec"]["template"]["spec"]
    (delete,) = spec["containers"]
    assert delete["command"][1:4] == ["delete", "--endpoint=10.1.0.1:9000", "--bucket=etcd-backups"]
    assert "--key=team/a/b1.db" in delete["command"]
    assert not any(arg.startswith("--file") for arg in delete["command"])
    assert [v["name"] for v in spec["volumes"]] == ["s3"]
    assert spec["volumes"][0]["secret"]["secretName"] == "etcd-s3-delete-b1-s3"
    assert backups.in_s3({"location": "s3://etcd-backups/team/a/b1.db"})
    assert not backups.in_s3({"location": "pvc://c/etcd-backups/b1.db"})
    assert not backups.in_s3({})
