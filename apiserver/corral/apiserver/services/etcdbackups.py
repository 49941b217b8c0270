"""etcd backups of provisioned clusters (docs/api.md, "etcd backups"): the `/v3` view of an
EtcdBackup, and the two cluster actions that make and use one, `backupEtcd` and
`restoreFromEtcdBackup`. The operator takes the snapshot and carries the restore out; these
only check and write what was asked.
"""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.core import errors, jsonpatch
from corral.core.api import drivers, names
from corral.core.api.ids import ScopedId
from corral.core.kube import guarded, kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.provisioning import backups
from corral.core.provisioning import restore as rs

SCHEMA = Schema(
    id="etcdBackup",
    plural="etcdBackups",
    fields={
        "clusterId": readonly("reference[cluster]"),
        "manual": readonly("boolean"),
        "filename": readonly("string"),
        "location": readonly(
            "string",
            "pvc://<cluster>/etcd-backups/<file>, or "
            "s3://<bucket>/<folder>/<file> for a cluster with an S3 target",
        ),
        "size": readonly("int", "Bytes"),
        "sha256": readonly("string", "The file's SHA-256, of a backup in S3"),
        "s3": readonly(
            "json",
            "The S3 target (no key): endpoint, bucket, folder, region, "
            "endpointCA, skipSSLVerify, cloudCredentialName, and the object's size",
        ),
        "createdAt": readonly("date"),
        "kubernetesVersion": readonly("string"),
        "etcdVersion": readonly("string"),
        "revision": readonly("int"),
        "state": readonly("string", "activating, active or failed"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET",),
)
RESTORE_INPUT = Schema(
    id="restoreFromEtcdBackupInput",
    plural="restoreFromEtcdBackupInputs",
    embedded=True,
    fields={
        "etcdBackupName": Field("string", create=True, description="A backup of this cluster"),
        "etcdBackupId": Field("reference[etcdBackup]", create=True,
                              description="Rancher's form: <cluster>:<name>"),
        "restoreRkeConfig": Field("enum", create=True, options=backups.RESTORE_MODES,
                                  description="\"\": etcd only; kubernetesVersion: and the "
                                  "version; all: and the rke2/k3s configuration"),
    },
)  # fmt: skip


def backup_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def state(obj: Obj) -> tuple[str, str, str]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == backups.COMPLETED:
            if condition.get("status") == "True":
                return "active", "no", ""
            return "failed", "error", condition.get("message", "")
    return "activating", "yes", "taking the snapshot"


def fields(obj: Obj) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    current, transitioning, message = state(obj)
    return {
        "id": backup_id(obj),
        "name": obj["metadata"]["name"],
        "namespaceId": obj["metadata"]["namespace"],
        "clusterId": spec.get("clusterId", ""),
        "manual": spec.get("manual", True),
        **{key: status.get(key, "") for key in (
            "filename", "location", "createdAt", "kubernetesVersion", "etcdVersion", "sha256")},
        **({"s3": status["s3"]} if "s3" in status else {}),
        "size": status.get("size", 0),
        "revision": status.get("revision", 0),
        "state": current,
        "transitioning": transitioning,
        "transitioningMessage": message,
        **object_stamp(obj),
    }  # fmt: skip


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    base = base_url(request)
    shown = object_fields(obj, ("name", "namespace", "creationTimestamp"))
    # The cluster's spec inside is for restores, not for reading.
    shown["status"] = {k: v for k, v in shown["status"].items() if k != "clusterObject"}
    body = {**fields(obj), **shown}
    links = {"cluster": f"{base}/v3/clusters/{obj['metadata']['namespace']}"}
    return envelope.resource(base, SCHEMA, body, links=links)


def _provisioned(obj: Obj, action: str) -> None:
    """422 unless corral runs the cluster's etcd."""
    driver = (obj.get("spec") or {}).get("driver")
    if driver not in drivers.HOSTED:
        raise errors.Invalid(
            f"{action} needs a cluster that corral provisions (rke2 or k3s); this cluster "
            f"is {driver}, and its etcd and certificates are managed outside corral",
            code="InvalidAction",
        )


def _restoring(obj: Obj) -> bool:
    current = rs.record((obj.get("status") or {}).get("provisioning"))
    return rs.pending(rs.requested(obj.get("spec") or {}), current)


async def backup(request: web.Request, cluster: Obj) -> web.Response:
    """A new EtcdBackup of a provisioned, Ready cluster (201 with it); the operator takes it."""
    _provisioned(cluster, "backupEtcd")
    name = cluster["metadata"]["name"]
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (cluster.get("status") or {}).get("conditions") or []
    )
    if not ready or _restoring(cluster):
        raise errors.Invalid(
            f"backupEtcd needs cluster {name} Ready, with no restore under way",
            code="InvalidAction",
        )
    obj = kinds.EtcdBackup(
        metadata=ObjectMeta(
            name=backups.backup_name(name, datetime.datetime.now(datetime.UTC)),
            namespace=name,
            labels={names.LABEL_CLUSTER: name, names.LABEL_MANAGED_BY: names.MANAGED_BY},
        ),
        spec={"clusterId": name, "manual": True},
    )
    try:
        created = as_dict(await request.app[DEPS].kube.create(obj))
        request.app[DEPS].stores.etcdbackups.put(created)
    except KubeError as exc:
        if exc.status.code == 409:
            raise errors.conflict("a backup was taken this second; ask again") from None
        raise
    return web.json_response(render(request, created), status=201)


async def restore(request: web.Request, cluster: Obj, body: dict[str, Any]) -> Obj:
    """Write the restore request into the cluster's spec, with what the mode restores; 422
    naming the field (and nothing written) when the backup is not a completed one of this
    cluster's. The cluster as written."""
    _provisioned(cluster, "restoreFromEtcdBackup")
    name = cluster["metadata"]["name"]
    asked = backups.restore_request(name, body)

    async def decide(cluster: Obj) -> list[jsonpatch.Operation]:
        if _restoring(cluster):
            raise errors.invalid(
                asked.field, f"a restore of cluster {name} is under way", code="InvalidAction"
            )
        found = request.app[DEPS].stores.etcdbackups.get(f"{name}/{asked.name}")
        backups.check_backup(name, asked, found)
        assert found is not None
        spec = cluster.get("spec") or {}
        restored = backups.restored_spec(
            spec["driver"], asked.mode, found, request.app[DEPS].stores.catalog()
        )
        previous = rs.requested(spec)
        generation = max(previous.generation if previous else 0, rs.record(
            (cluster.get("status") or {}).get("provisioning")).generation) + 1  # fmt: skip
        config = f"{spec['driver']}Config"
        if config in restored and isinstance(spec.get(config), dict):
            # `all` puts the configuration back whole: keys added since the backup go.
            restored[config] = {key: None for key in spec[config]} | restored[config]
        wanted = {"name": asked.name, "generation": generation, "restoreRKEConfig": asked.mode}
        return [
            *jsonpatch.from_merge(cluster, {"spec": restored}),
            jsonpatch.add(cluster, ("spec", "etcdSnapshotRestore"), wanted),
        ]

    # Decided on the cluster as stored now and written on condition that what it read is
    # still so (its spec, and the last restore done): two restores asked at once get two
    # generations, a restore under way is seen, and the operator's other status writes do
    # not stand in the way.
    kube = request.app[DEPS].kube
    written = await guarded.patch(kube, kinds.Cluster, name, decide, rs.READS)
    request.app[DEPS].stores.clusters.put(written)
    return written
