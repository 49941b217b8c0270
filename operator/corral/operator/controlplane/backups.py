"""Taking an etcd backup of a hosted control plane (docs/provisioning.md, "Backups and
restores"): the claim `etcd-backups`, a Job that saves the snapshot onto it and prints its
status, and the EtcdBackup's status from that Job's log. The objects are
`corral.core.provisioning.backups`'.

`take` is one idempotent pass: it makes what is missing and says whether the backup is done,
so that the kopf handler calling it retries until it is, and an operator restarted mid-way
finds the same Job by its name.
"""

from __future__ import annotations

import logging
from typing import Any

from lightkube import ApiError, AsyncClient, codecs
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Pod, Secret, Service
from lightkube.types import CascadeType

from corral.core import times
from corral.core.api import names
from corral.core.conditions import Condition
from corral.core.drivers import templates
from corral.core.errors import CorralError, Invalid
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.kube.status import StatusWriter
from corral.core.provisioning import backups, catalog, s3
from corral.core.provisioning import pki as cp
from corral.operator.controlplane import inputs
from corral.operator.state import State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-etcd-backup"
MAX_LOG = 64 * 1024


async def take(state: State, backup: Obj) -> bool:
    """True once the backup has its status (done, or failed with why)."""
    meta = backup["metadata"]
    name, cluster = meta["name"], meta["namespace"]
    if any(c.get("type") == backups.COMPLETED for c in _conditions(backup)):
        # Its Job may be left when an operator stopped between the status and the deletion.
        await delete_job(state.kube, backups.snapshot_job_name(name), cluster)
        return True
    body = state.clusters.get(cluster)
    if body is None or body["metadata"].get("deletionTimestamp"):
        # A Job made now would hold the claims the cluster's deletion is removing.
        await _finish(state, backup, {}, ok=False, message=f"cluster {cluster} is going")
        return True
    kube = state.kube
    job_name = backups.snapshot_job_name(name)
    try:
        target = s3.cluster_target(body["spec"])
    except Invalid as exc:
        await _finish(state, backup, {}, ok=False, message=f"the S3 target: {exc.message}")
        return True
    job = await get(kube, Job, job_name, cluster)
    if job is None:
        await apply(kube, backups.claim(cluster, inputs.storage_class(state.settings)))
        release = inputs.release(state.settings, body["spec"].get("kubernetesVersion") or "")
        service = await kube.get(Service, cp.ETCD_SERVICE, namespace=cluster)
        etcd_ip = service.spec.clusterIP if service.spec else None
        if not etcd_ip:
            raise CorralError(f"cluster {cluster}'s etcd has no address yet")
        try:
            keys = None if target is None else await s3_keys(kube, release, target)
        except Invalid as exc:
            await _finish(state, backup, {}, ok=False, message=f"the S3 target: {exc.message}")
            return True
        made = await apply(kube, backups.snapshot_job(cluster, name, release, etcd_ip, target))
        if keys is not None:
            await apply(kube, backups.s3_secret(cluster, job_name, made["metadata"]["uid"], keys))
        log.info("cluster %s: taking etcd backup %s", cluster, name)
        return False
    outcome = backups.job_outcome(job)
    if outcome is None:
        if target is not None:
            await _keep_keys(state, cluster, job, target)
        return False
    fields: dict[str, Any] = {
        "filename": backups.filename(name),
        "location": backups.location(cluster, name),
        "kubernetesVersion": body["spec"].get("kubernetesVersion") or "",
        "clusterObject": backups.encode_cluster_object(body["spec"]),
    }
    if target is not None:
        fields |= {"location": target.location(fields["filename"]), "s3": target.described()}
    if outcome:
        # Only a Job that succeeded has logs of every container: a failed init container's
        # pod never started the others, whose logs the API refuses.
        said = await job_log(kube, job_name, cluster, "status")
        try:
            fields |= backups.snapshot_status(said).fields()
            if target is not None:
                sent, fields["sha256"] = backups.uploaded(
                    await job_log(kube, job_name, cluster, "upload")
                )
                # The object's size: the file's, which etcdutl's `size` (the database's) is not.
                fields["s3"] = {**fields["s3"], "size": sent}
        except (ValueError, KeyError) as exc:
            await _finish(state, backup, fields, ok=False, message=f"no snapshot status: {exc}")
            return True
    message = "" if outcome else await failure(kube, job_name, cluster)
    await _finish(state, backup, fields, ok=outcome, message=message)
    await delete_job(kube, job_name, cluster)
    return True


async def _keep_keys(state: State, cluster: str, job: Obj, target: s3.Target) -> None:
    body = state.clusters.get(cluster) or {}
    version = (body.get("spec") or {}).get("kubernetesVersion") or ""
    await keep_keys(state.kube, job, inputs.release(state.settings, version), target)


async def _finish(
    state: State, backup: Obj, fields: dict[str, Any], ok: bool, message: str
) -> None:
    meta = backup["metadata"]
    fields = {**fields, "createdAt": times.format_time(state.clock())}
    condition = Condition.of(
        backups.COMPLETED, ok, "Saved" if ok else "Failed", message or "the snapshot is saved"
    )
    writer = StatusWriter(state.kube, FIELD_MANAGER, state.clock)
    await writer.apply(
        kinds.EtcdBackup, meta["name"], meta["namespace"], seen=backup,
        conditions=[condition], fields=fields,
    )  # fmt: skip
    level = logging.INFO if ok else logging.WARNING
    log.log(level, "etcd backup %s/%s: %s", meta["namespace"], meta["name"], condition.message)


def _conditions(obj: Obj) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


# -- shared with the restore ----------------------------------------------------------------


async def s3_keys(kube: AsyncClient, release: catalog.Release, target: s3.Target) -> dict[str, str]:
    """The data of a Job's S3 Secret: the keys of the target's credential (and its CA).
    Invalid when the version cannot copy to S3 or the credential is gone or not an S3 one."""
    s3.check_release(release, "kubernetesVersion")
    credential = await get(kube, kinds.CloudCredential, target.credential, None)
    s3.check_credential(credential, target, "etcd.s3")
    secret = await get(
        kube, Secret, names.cloud_credential_secret_name(target.credential),
        names.SYSTEM_NAMESPACE,
    )  # fmt: skip
    return s3.job_secret_data(templates.decode((secret or {}).get("data")), target)


async def keep_keys(
    kube: AsyncClient, job: Obj, release: catalog.Release, target: s3.Target
) -> None:
    """The Secret of keys of a running Job, made again when an operator stopped between the
    Job and it: the Job's pod waits for that volume."""
    meta = job["metadata"]
    if await get(kube, Secret, backups.s3_secret_name(meta["name"]), meta["namespace"]):
        return
    keys = await s3_keys(kube, release, target)
    await apply(kube, backups.s3_secret(meta["namespace"], meta["name"], meta["uid"], keys))


async def apply(kube: AsyncClient, obj: dict[str, Any]) -> Obj:
    return as_dict(await kube.apply(codecs.from_dict(obj), field_manager=FIELD_MANAGER, force=True))


async def get(kube: AsyncClient, kind: Any, name: str, namespace: str | None) -> Obj | None:
    try:
        return as_dict(await kube.get(kind, name, namespace=namespace))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


async def delete_job(kube: AsyncClient, name: str, namespace: str) -> None:
    """The Job and its pods (a Job's own deletion default orphans them)."""
    try:
        await kube.delete(Job, name, namespace=namespace, cascade=CascadeType.BACKGROUND)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


async def job_log(kube: AsyncClient, job: str, namespace: str, container: str) -> str:
    pods = [p async for p in kube.list(Pod, namespace=namespace, labels={"job-name": job})]
    if not pods or not pods[0].metadata or not pods[0].metadata.name:
        return ""
    lines = []
    async for line in kube.log(pods[0].metadata.name, namespace=namespace, container=container):
        lines.append(line)
    return "".join(lines)[-MAX_LOG:]


async def failure(kube: AsyncClient, job: str, namespace: str) -> str:
    """Why the Job's pod failed: its containers' last words."""
    said = []
    async for pod in kube.list(Pod, namespace=namespace, labels={"job-name": job}):
        if pod.status is None:
            continue
        status = pod.status
        for container in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
            ended = container.state.terminated if container.state else None
            if ended and ended.exitCode:
                said.append(f"{container.name}: exit code {ended.exitCode}: {ended.message or ''}")
    return "; ".join(said)[:2000] or f"Job {job} failed"


async def remove_object(state: State, backup: Obj) -> bool:
    """One pass of removing a deleted backup's object from its S3 target; True once done
    (removed, or failed and logged: a deletion is never held up for good). A backup whose
    cluster is gone or going keeps its object: the copy in S3 is what outlives the cluster,
    and no Job can run in a namespace being deleted."""
    meta = backup["metadata"]
    name, cluster = meta["name"], meta["namespace"]
    body = state.clusters.get(cluster)
    if body is None or body["metadata"].get("deletionTimestamp"):
        log.info("etcd backup %s/%s: its cluster is going; its S3 object stays", cluster, name)
        return True
    kube = state.kube
    job_name = backups.s3_delete_job_name(name)
    job = await get(kube, Job, job_name, cluster)
    if job is None:
        try:
            target = s3.recorded(backup.get("status") or {})
            if target is None:
                return True
            release = inputs.release(state.settings, body["spec"].get("kubernetesVersion") or "")
            keys = await s3_keys(kube, release, target)
        except Invalid as exc:
            log.warning("etcd backup %s/%s: its S3 object stays: %s", cluster, name, exc.message)
            return True
        made = await apply(kube, backups.s3_delete_job(cluster, name, release, target))
        await apply(kube, backups.s3_secret(cluster, job_name, made["metadata"]["uid"], keys))
        return False
    outcome = backups.job_outcome(job)
    if outcome is None:
        return False
    if outcome:
        log.info("etcd backup %s/%s: its S3 object is removed", cluster, name)
    else:
        said = await failure(kube, job_name, cluster)
        log.warning("etcd backup %s/%s: its S3 object stays: %s", cluster, name, said)
    await delete_job(kube, job_name, cluster)
    return True
