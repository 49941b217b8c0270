"""etcd backups and restores of hosted control planes: the Jobs, the snapshot's status, the
checks of a restore request, the restore record's phases and the cluster's `Updated`."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.clusters import observe
from corral.core.errors import Invalid
from corral.core.provisioning import backups, catalog, manifests
from corral.core.provisioning import restore as rs

from .test_provisioning_manifests import ADDRESSES, plan, release

CLUSTER = "c-m-abc"


def completed_backup(cluster: str = CLUSTER, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Completed", "status": "True"}]}
    if spec is not None:
        status["clusterObject"] = backups.encode_cluster_object(spec)
    return {"metadata": {"name": "b1", "namespace": cluster}, "spec": {"clusterId": cluster},
            "status": status}  # fmt: skip


def test_names_and_location_follow_the_cluster_and_time() -> None:
    at = datetime.datetime(2026, 11, 24, 7, 5, 9, tzinfo=datetime.UTC)
    name = backups.backup_name(CLUSTER, at)
    assert name == "c-m-abc-20261124070509"
    assert backups.location(CLUSTER, name) == f"pvc://c-m-abc/etcd-backups/{name}.db"
    assert len(backups.snapshot_job_name(name)) <= 63


def test_the_snapshot_job_saves_over_etcds_client_tls_then_prints_the_status() -> None:
    job = backups.snapshot_job(CLUSTER, "b1", release(), ADDRESSES.etcd_ip)
    spec = job["spec"]["template"]["spec"]
    (save,), status = spec["initContainers"], spec["containers"][0]
    assert save["command"][-3:] == ["snapshot", "save", "/backups/b1.db"]
    assert "--endpoints=https://10.0.0.41:2379" in save["command"]
    assert "--cert=/pki/etcd-client.crt" in save["command"]
    assert status["command"][-4:] == ["status", "/backups/b1.db", "-w", "json"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["backups"]["persistentVolumeClaim"]["claimName"] == "etcd-backups"
    assert volumes["pki"]["secret"]["secretName"] == "pki-apiserver"
    assert {i["key"] for i in volumes["pki"]["secret"]["items"]} == {
        "etcd-ca.crt",
        "etcd-client.crt",
        "etcd-client.key",
    }
    # Labelled with the cluster, so that deleting the cluster finds it; never retried.
    assert job["metadata"]["labels"][names.LABEL_CLUSTER] == CLUSTER
    assert job["spec"]["backoffLimit"] == 0
    assert spec["automountServiceAccountToken"] is False


def test_the_restore_job_restores_into_fresh_data_as_the_same_member_with_revisions_bumped() -> (
    None
):
    job = backups.restore_job(plan(), "b1", 3)
    assert job["metadata"]["name"] == "etcd-restore-3"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    argv = container["command"]
    assert argv[1:4] == ["snapshot", "restore", "/backups/b1.db"]
    assert "--data-dir=/var/lib/etcd/data-3" in argv
    assert "--bump-revision=1000000000" in argv and "--mark-compacted" in argv
    assert "--initial-cluster-token=c-m-abc" in argv and "--name=etcd" in argv
    # The member's own flags (manifests.etcd), so the restored data is the same member's.
    etcd_argv = manifests_etcd_argv()
    for flag in ("--initial-cluster=", "--initial-advertise-peer-urls="):
        assert [a for a in argv if a.startswith(flag)] == [
            a for a in etcd_argv if a.startswith(flag)
        ]
    claims = {v["persistentVolumeClaim"]["claimName"] for v in
              job["spec"]["template"]["spec"]["volumes"]}  # fmt: skip
    assert claims == {"etcd-backups", "etcd-data-etcd-0"}


def manifests_etcd_argv() -> list[str]:
    return list(manifests.etcd(plan())["spec"]["template"]["spec"]["containers"][0]["command"])


def test_the_snapshot_status_is_the_json_line_of_the_log() -> None:
    said = {"hash": 12, "revision": 345, "totalKey": 67, "totalSize": 8192, "version": "3.6.0"}
    parsed = backups.snapshot_status("some warning\n" + json.dumps(said) + "\n")
    assert parsed.fields() == {"size": 8192, "revision": 345, "hash": 12, "totalKeys": 67,
                               "etcdVersion": "3.6.0"}  # fmt: skip
    with pytest.raises(ValueError, match="no JSON"):
        backups.snapshot_status("Error: no such file\n")


def test_the_cluster_object_round_trips() -> None:
    spec = {"driver": "rke2", "kubernetesVersion": "v1.36.3", "rke2Config": {"a": 1}}
    assert backups.decode_cluster_object(backups.encode_cluster_object(spec)) == spec


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({}, "etcdBackupName", "MissingRequired"),
        ({"etcdBackupName": "b1", "restoreRkeConfig": "etcd"}, "restoreRkeConfig",
         "InvalidOption"),
        ({"etcdBackupId": "c-m-other:b1"}, "etcdBackupId", "InvalidReference"),
        ({"etcdBackupName": 3}, "etcdBackupName", None),
    ],
)  # fmt: skip
def test_a_restore_request_names_one_of_this_clusters_backups(
    body: dict[str, Any], field: str, code: str | None
) -> None:
    with pytest.raises(Invalid) as refused:
        backups.restore_request(CLUSTER, body)
    assert refused.value.field == field and refused.value.code == code


def test_a_restore_request_by_id_or_name() -> None:
    by_id = backups.restore_request(CLUSTER, {"etcdBackupId": f"{CLUSTER}:b1"})
    assert (by_id.name, by_id.mode, by_id.field) == ("b1", "", "etcdBackupId")
    by_name = backups.restore_request(CLUSTER, {"etcdBackupName": "b1", "restoreRkeConfig": "all"})
    assert (by_name.name, by_name.mode) == ("b1", "all")


def test_only_a_completed_backup_of_the_same_cluster_is_restored() -> None:
    asked = backups.restore_request(CLUSTER, {"etcdBackupName": "b1"})
    backups.check_backup(CLUSTER, asked, completed_backup())
    for backup, said in (
        (None, "not found"),
        (completed_backup("c-m-other"), "belongs to cluster c-m-other"),
        ({**completed_backup(), "status": {}}, "has not completed"),
    ):
        with pytest.raises(Invalid, match=said) as refused:
            backups.check_backup(CLUSTER, asked, backup)
        assert refused.value.field == "etcdBackupName"
    with pytest.raises(Invalid, match="kept no cluster configuration"):
        backups.check_backup(
            CLUSTER, backups.restore_request(CLUSTER, {"etcdBackupName": "b1",
                                                      "restoreRkeConfig": "all"}),
            completed_backup(),
        )  # fmt: skip


def test_the_modes_restore_the_version_and_the_configuration_never_more() -> None:
    versions = catalog.Catalog({"v1.36.3": release()})
    saved = {"driver": "rke2", "kubernetesVersion": "v1.36.3", "displayName": "old",
             "rke2Config": {"networking": {"plugin": "canal"}}}  # fmt: skip
    backup = completed_backup(spec=saved)
    assert backups.restored_spec("rke2", "", backup, versions) == {}
    assert backups.restored_spec("rke2", "kubernetesVersion", backup, versions) == {
        "kubernetesVersion": "v1.36.3"
    }
    assert backups.restored_spec("rke2", "all", backup, versions) == {
        "kubernetesVersion": "v1.36.3",
        "rke2Config": {"networking": {"plugin": "canal"}},
    }
    gone = completed_backup(spec={**saved, "kubernetesVersion": "v1.35.0"})
    with pytest.raises(Invalid) as refused:
        backups.restored_spec("rke2", "kubernetesVersion", gone, versions)
    assert refused.value.field == "restoreRkeConfig"


def test_a_restore_goes_through_its_phases_once_per_generation() -> None:
    request = rs.requested({"etcdSnapshotRestore": {"name": "b1", "generation": 2}})
    assert request == rs.Request("b1", 2, "")
    before = rs.record({"etcdDataDir": "data-1", "restoreGeneration": 1})
    assert rs.pending(request, before)
    started = rs.start(request, before)
    assert started.restore == rs.Restore("b1", 2, rs.SHUTDOWN)
    # Started again (an operator restart): the same record, never a new restore.
    assert rs.start(request, started) == started
    assert rs.start(request, started.moved(rs.RESTORE)).restore.phase == rs.RESTORE  # type: ignore[union-attr]

    stopped = rs.plan_for(plan(), started)
    assert (stopped.etcd_replicas, stopped.control_plane_replicas) == (0, 0)
    assert stopped.etcd_data_dir == "data-1"
    restarting = rs.plan_for(plan(), started.moved(rs.RESTART))
    assert (restarting.etcd_replicas, restarting.etcd_data_dir) == (1, "data-2")

    finished = rs.finish(started.moved(rs.RESTART), rs.FINISHED)
    assert (finished.data_dir, finished.generation) == ("data-2", 2)
    assert not rs.pending(request, finished)
    assert rs.record(finished.fields()) == finished
    assert rs.plan_for(plan(), finished).etcd_data_dir == "data-2"

    failed = rs.finish(started.moved(rs.RESTORE), rs.FAILED, "exit code 1")
    assert (failed.data_dir, failed.generation) == ("data-1", 2)
    assert rs.plan_for(plan(), failed).etcd_replicas == 1


def test_a_cluster_never_restored_runs_on_its_first_data() -> None:
    assert rs.requested({}) is None
    assert rs.record(None).fields() == {"etcdDataDir": "data-0", "restoreGeneration": 0}
    assert rs.plan_for(plan(), rs.record({})).etcd_data_dir == "data-0"


def test_updated_is_false_restoring_while_a_restore_runs() -> None:
    probe = observe.Probe(reachable=False, ready=False, message="down")
    running = rs.start(rs.Request("b1", 1, ""), rs.Record()).moved(rs.RESTORE)
    conditions = observe.cluster_conditions(
        "rke2", True, probe, [], provisioning={"step": "Restoring", **running.fields()}
    )
    (updated,) = [c for c in conditions if c.type == ct.UPDATED]
    assert (updated.status, updated.reason) == ("False", ct.REASON_RESTORING)
    assert "restoring etcd backup b1" in updated.message and "fresh data" in updated.message
    done = rs.finish(running.moved(rs.RESTART), rs.FINISHED)
    conditions = observe.cluster_conditions("rke2", True, probe, [], provisioning=done.fields())
    (updated,) = [c for c in conditions if c.type == ct.UPDATED]
    assert updated.status == "True"
