"""etcd backups of a hosted control plane (docs/provisioning.md, "Backups and restores"): the
EtcdBackup's names, the claim its files live on, the Jobs that save and restore a snapshot, and
what `etcdutl snapshot status -w json` says about one.

Pure: the operator applies these objects and reads the Jobs back; the API server checks a
restore request with `restore_request` before it writes anything.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.errors import Invalid
from corral.core.provisioning import catalog, manifests, s3
from corral.core.provisioning import pki as cp

CLAIM = "etcd-backups"
CLAIM_SIZE = "1Gi"
ROOT = "/backups"
PKI = "/pki"
COMPONENT = "etcd-backup"
COMPLETED = "Completed"
# The etcd recovery guide's value: far above any revision a client can have seen, so that every
# watch of the restored cluster starts over instead of missing the rollback.
REVISION_BUMP = 1_000_000_000
RESTORE_MODES = ("", "kubernetesVersion", "all")
# The StatefulSet's first member's claim: `<template>-<statefulset>-0`.
ETCD_CLAIM = f"{manifests.ETCD_DATA}-etcd-0"
# A Job that fails is not retried: a failed snapshot or restore is reported, and asking again
# makes a new one (a new name, a new generation), so nothing is ever done twice.
BACKOFF_LIMIT = 0
ETCD_CLIENT_FILES = ("etcd-ca.crt", "etcd-client.crt", "etcd-client.key")


def backup_name(cluster: str, now: datetime.datetime) -> str:
    return f"{cluster}-{now.astimezone(datetime.UTC):%Y%m%d%H%M%S}"


def filename(name: str) -> str:
    return f"{name}.db"


def location(cluster: str, name: str) -> str:
    return f"pvc://{cluster}/{CLAIM}/{filename(name)}"


def snapshot_job_name(backup: str) -> str:
    return f"etcd-snapshot-{backup}"


def restore_job_name(generation: int) -> str:
    return f"etcd-restore-{generation}"


def s3_delete_job_name(backup: str) -> str:
    return f"etcd-s3-delete-{backup}"


def s3_secret_name(job: str) -> str:
    """The Secret of a Job's S3 keys, named after the Job that alone mounts it."""
    return f"{job}-s3"


def s3_secret(cluster: str, job: str, job_uid: str, data: Mapping[str, str]) -> dict[str, Any]:
    """The target's keys (and CA) for the Job `job` alone, which owns it: Kubernetes deletes it
    with the Job."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": s3_secret_name(job),
            "namespace": cluster,
            "labels": manifests.labels(cluster, COMPONENT),
            "ownerReferences": [owner],
        },
        "type": "Opaque",
        "stringData": dict(data),
    }


def uploaded(log: str) -> tuple[int, str]:
    """The size and SHA-256 `etcd-s3 upload` printed (its one JSON line)."""
    for line in reversed(log.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            found = json.loads(line)
            return int(found["size"]), str(found["sha256"])
    raise ValueError("etcd-s3 upload printed no JSON")


def data_dir(generation: int) -> str:
    """Where the restore of `generation` puts etcd's data: a fresh directory each time, so the
    member never starts on half-restored data and the old one stays until the new one is whole."""
    return f"data-{generation}"


def encode_cluster_object(spec: Mapping[str, Any]) -> str:
    return base64.b64encode(gzip.compress(json.dumps(dict(spec), sort_keys=True).encode())).decode()


def decode_cluster_object(text: str) -> dict[str, Any]:
    decoded = json.loads(gzip.decompress(base64.b64decode(text)))
    if not isinstance(decoded, dict):
        raise ValueError("the cluster object is not a JSON object")
    return decoded


def claim(cluster: str, storage_class: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": CLAIM_SIZE}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": CLAIM,
            "namespace": cluster,
            "labels": manifests.labels(cluster, COMPONENT),
        },
        "spec": spec,
    }


def snapshot_job(
    cluster: str,
    backup: str,
    release: catalog.Release,
    etcd_ip: str,
    target: s3.Target | None = None,
) -> dict[str, Any]:
    """`etcdctl snapshot save` over etcd's client TLS onto the backups claim, then `etcdutl
    snapshot status -w json`, whose output (the pod's log) the operator reads. With `target`,
    `etcd-s3 upload` copies the file there in between, its keys read from the Job's own
    Secret (`s3_secret`), and prints the size and SHA-256 it sent."""
    etcdctl = release.component(catalog.ETCDCTL)
    etcdutl = release.component(catalog.ETCDUTL)
    path = f"{ROOT}/{filename(backup)}"
    save = {
        **_container("save", etcdctl),
        "command": [
            *etcdctl.command,
            f"--endpoints=https://{etcd_ip}:{manifests.ETCD_CLIENT_PORT}",
            f"--cacert={PKI}/etcd-ca.crt",
            f"--cert={PKI}/etcd-client.crt",
            f"--key={PKI}/etcd-client.key",
            "snapshot",
            "save",
            path,
        ],
        "volumeMounts": [
            {"name": "backups", "mountPath": ROOT},
            {"name": "pki", "mountPath": PKI, "readOnly": True},
        ],
    }
    status = {
        **_container("status", etcdutl),
        "command": [*etcdutl.command, "snapshot", "status", path, "-w", "json"],
        "volumeMounts": [{"name": "backups", "mountPath": ROOT, "readOnly": True}],
    }
    volumes = [
        {"name": "backups", "persistentVolumeClaim": {"claimName": CLAIM}},
        {
            "name": "pki",
            "secret": {
                "secretName": cp.APISERVER,
                "defaultMode": 0o400,
                # Only etcd's client identity: never the apiserver's keys beside it.
                "items": [{"key": key, "path": key} for key in ETCD_CLIENT_FILES],
            },
        },
    ]
    init = [save]
    if target is not None:
        job = snapshot_job_name(backup)
        init.append(_s3_container("upload", release, target, backup, path))
        volumes.append(_s3_volume(job))
    return _job(cluster, snapshot_job_name(backup), init, status, volumes)


def s3_delete_job(
    cluster: str, backup: str, release: catalog.Release, target: s3.Target
) -> dict[str, Any]:
    """`etcd-s3 delete` of a deleted backup's object, with the Job's own Secret of keys."""
    job = s3_delete_job_name(backup)
    tool = release.component(catalog.ETCD_S3)
    delete = {
        **_container("delete", tool),
        "command": s3.argv(tool, "delete", target, filename(backup), ""),
        "volumeMounts": [{"name": "s3", "mountPath": s3.MOUNT, "readOnly": True}],
    }
    return _job(cluster, job, [], delete, [_s3_volume(job)])


def in_s3(status: Mapping[str, Any]) -> bool:
    return str(status.get("location") or "").startswith("s3://")


def _s3_container(
    operation: str, release: catalog.Release, target: s3.Target, backup: str, path: str,
    sha256: str = "",
) -> dict[str, Any]:  # fmt: skip
    """The container of `etcd-s3 <operation>` (upload or download) of the backup's file."""
    tool = release.component(catalog.ETCD_S3)
    command = s3.argv(tool, operation, target, filename(backup), path)
    if sha256:
        command.append(f"--sha256={sha256}")
    mounts = [
        {"name": "backups", "mountPath": ROOT, "readOnly": True},
        {"name": "s3", "mountPath": s3.MOUNT, "readOnly": True},
    ]
    if operation == "download":
        mounts = [mounts[1], {"name": "downloads", "mountPath": s3.DOWNLOADS}]
    return {**_container(operation, tool), "command": command, "volumeMounts": mounts}


def _s3_volume(job: str) -> dict[str, Any]:
    return {
        "name": "s3",
        "secret": {"secretName": s3_secret_name(job), "defaultMode": 0o400},
    }


def restore_job(
    plan: manifests.Plan,
    backup: str,
    generation: int,
    target: s3.Target | None = None,
    sha256: str = "",
) -> dict[str, Any]:
    """`etcdutl snapshot restore` into a fresh data directory on etcd's own claim, with the
    member's name, peer URL and token (manifests.etcd) and the revisions bumped and marked
    compacted. With `target` (a backup whose location is S3), `etcd-s3 download` first fetches
    the file into the Job's own volume and checks its SHA-256, and the restore reads that."""
    etcdutl = plan.release.component(catalog.ETCDUTL)
    peer = f"http://127.0.0.1:{manifests.ETCD_PEER_PORT}"
    source = f"{s3.DOWNLOADS if target else ROOT}/{filename(backup)}"
    restore = {
        **_container("restore", etcdutl),
        "command": [
            *etcdutl.command,
            "snapshot",
            "restore",
            source,
            f"--data-dir={manifests.ETCD_DATA_ROOT}/{data_dir(generation)}",
            "--name=etcd",
            f"--initial-cluster=etcd={peer}",
            f"--initial-cluster-token={plan.cluster}",
            f"--initial-advertise-peer-urls={peer}",
            f"--bump-revision={REVISION_BUMP}",
            "--mark-compacted",
        ],
        "volumeMounts": [
            {"name": "backups", "mountPath": ROOT, "readOnly": True},
            {"name": "data", "mountPath": manifests.ETCD_DATA_ROOT},
        ],
    }
    volumes = [
        {"name": "backups", "persistentVolumeClaim": {"claimName": CLAIM}},
        {"name": "data", "persistentVolumeClaim": {"claimName": ETCD_CLAIM}},
    ]
    init = []
    if target is not None:
        job = restore_job_name(generation)
        download = _s3_container("download", plan.release, target, backup, source, sha256)
        init.append(download)
        restore["volumeMounts"].append({"name": "downloads", "mountPath": s3.DOWNLOADS})
        # Twice the claim's size: a snapshot that fit on it fits here.
        volumes += [_s3_volume(job), {"name": "downloads", "emptyDir": {"sizeLimit": "2Gi"}}]
    return _job(plan.cluster, restore_job_name(generation), init, restore, volumes)


def _container(name: str, component: catalog.Component) -> dict[str, Any]:
    return {
        "name": name,
        "image": component.image,
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "20m", "memory": "32Mi"}},
        # Root reads the 0400 Secret files and writes the root-owned hostPath directories.
        "securityContext": {
            "runAsUser": 0,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
    }


def _job(
    cluster: str,
    name: str,
    init: list[dict[str, Any]],
    main: dict[str, Any],
    volumes: list[dict[str, Any]],
) -> dict[str, Any]:
    labels = manifests.labels(cluster, COMPONENT)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": cluster, "labels": labels},
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "initContainers": init,
                    "containers": [main],
                    "volumes": volumes,
                },
            },
        },
    }


@dataclass(frozen=True)
class SnapshotStatus:
    size: int
    revision: int
    hash: int
    total_keys: int
    etcd_version: str

    def fields(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "revision": self.revision,
            "hash": self.hash,
            "totalKeys": self.total_keys,
            "etcdVersion": self.etcd_version,
        }


def snapshot_status(log: str) -> SnapshotStatus:
    """What `etcdutl snapshot status -w json` printed: the last line that is a JSON object."""
    for line in reversed(log.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        found = json.loads(line)
        return SnapshotStatus(
            size=int(found["totalSize"]),
            revision=int(found["revision"]),
            hash=int(found["hash"]),
            total_keys=int(found["totalKey"]),
            etcd_version=str(found.get("version", "")),
        )
    raise ValueError("etcdutl snapshot status printed no JSON")


def job_outcome(job: Mapping[str, Any] | None) -> bool | None:
    """True once the Job succeeded, False once it failed, None while it runs (or is absent)."""
    if job is None:
        return None
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return True
        if condition.get("type") == "Failed":
            return False
    return None


def completed(backup: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == COMPLETED and c.get("status") == "True"
        for c in (backup.get("status") or {}).get("conditions") or []
    )


@dataclass(frozen=True)
class RestoreRequest:
    name: str  # the EtcdBackup's name in the cluster's namespace
    mode: str  # restoreRkeConfig
    field: str  # the input field that named the backup, for the 422s


def restore_request(cluster: str, body: Mapping[str, Any]) -> RestoreRequest:
    """The backup and mode a restoreFromEtcdBackup body names (`etcdBackupName`, or Rancher's
    `etcdBackupId` "<namespace>:<name>"); Invalid naming the field when it is not one of this
    cluster's."""
    mode = body.get("restoreRkeConfig") or ""
    if mode not in RESTORE_MODES:
        raise Invalid(
            "restoreRkeConfig must be one of \"\", kubernetesVersion, all", "restoreRkeConfig",
            code="InvalidOption",
        )  # fmt: skip
    if body.get("etcdBackupName"):
        field, given = "etcdBackupName", body["etcdBackupName"]
    elif body.get("etcdBackupId"):
        field, given = "etcdBackupId", body["etcdBackupId"]
    else:
        raise Invalid("etcdBackupName is required", "etcdBackupName", code="MissingRequired")
    if not isinstance(given, str):
        raise Invalid(f"{field} must be text", field)
    namespace, colon, name = given.rpartition(":")
    if colon and namespace != cluster:
        raise Invalid(
            f"backup {given} belongs to cluster {namespace}, not {cluster}", field,
            code="InvalidReference",
        )  # fmt: skip
    return RestoreRequest(name=name, mode=mode, field=field)


def check_backup(cluster: str, request: RestoreRequest, backup: Mapping[str, Any] | None) -> None:
    """Invalid unless `backup` is a completed backup of `cluster` that can give what the mode
    restores."""
    if backup is None:
        raise Invalid(
            f"backup {request.name} of cluster {cluster} not found", request.field,
            code="InvalidReference",
        )  # fmt: skip
    owner = (backup.get("spec") or {}).get("clusterId")
    if owner != cluster:
        raise Invalid(
            f"backup {request.name} belongs to cluster {owner}, not {cluster}", request.field,
            code="InvalidReference",
        )  # fmt: skip
    if not completed(backup):
        raise Invalid(
            f"backup {request.name} has not completed", request.field, code="InvalidReference"
        )
    if request.mode and not (backup.get("status") or {}).get("clusterObject"):
        raise Invalid(
            f"backup {request.name} kept no cluster configuration to restore", "restoreRkeConfig"
        )


def restored_spec(
    driver: str, mode: str, backup: Mapping[str, Any], versions: catalog.Catalog
) -> dict[str, Any]:
    """The spec fields `mode` puts back from the backup: the version for kubernetesVersion;
    the version and the flavour's configuration for all (never node pools, which are objects
    of their own). The version must still be in the catalog."""
    if not mode:
        return {}
    saved = decode_cluster_object(str((backup.get("status") or {})["clusterObject"]))
    version = saved.get("kubernetesVersion") or ""
    versions.release(version, "restoreRkeConfig")
    restored: dict[str, Any] = {"kubernetesVersion": version}
    config = f"{driver}Config"
    if mode == "all" and isinstance(saved.get(config), dict):
        restored[config] = saved[config]
    return restored
