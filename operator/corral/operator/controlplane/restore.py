"""The provisioner's part of a restore from an etcd backup: each pass moves the record
(`corral.core.provisioning.restore`) as far as the objects allow, and says what should run.

`advance` comes before the provisioner applies the plan, and returns the plan for the phase the
restore is in: replicas 0 while etcd's data is replaced, the restored data directory from
`Restart` on. Every phase is found again from names (the restore Job is
`etcd-restore-<generation>`) and what runs, so a pass repeated after a restart does no harm.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Pod

from corral.core.api import names
from corral.core.errors import Invalid
from corral.core.kube import kinds
from corral.core.provisioning import backups, manifests, s3
from corral.core.provisioning import restore as rs
from corral.operator.controlplane.backups import (
    apply,
    delete_job,
    failure,
    get,
    keep_keys,
    s3_keys,
)
from corral.operator.controlplane.runtime import ControlPlaneRuntime

log = logging.getLogger(__name__)

STOPPED_COMPONENTS = ("etcd", manifests.CONTROL_PLANE)


async def advance(
    kube: AsyncClient,
    runtime: ControlPlaneRuntime,
    spec: Mapping[str, Any],
    provisioning: Mapping[str, Any] | None,
    plan: manifests.Plan,
) -> tuple[rs.Record, manifests.Plan]:
    """The restore record after this pass's steps, and the plan to apply."""
    current = rs.record(provisioning)
    request = rs.requested(spec)
    if request is None or not rs.pending(request, current):
        return current, rs.plan_for(plan, current)
    if current.restore is None or current.restore.generation != request.generation:
        current = await _start(kube, plan.cluster, request, current)
    while current.restore is not None and current.restore.running:
        moved = await _step(kube, runtime, plan, current)
        if moved == current:
            break
        log.info("cluster %s: %s", plan.cluster, rs.message(moved) or moved.restore)
        current = moved
    return current, rs.plan_for(plan, current)


async def _start(
    kube: AsyncClient, cluster: str, request: rs.Request, current: rs.Record
) -> rs.Record:
    """The backup is checked again: it may have gone since the API accepted the request."""
    started = rs.start(request, current)
    backup = await get(kube, kinds.EtcdBackup, request.name, cluster)
    if backup is None or not backups.completed(backup):
        return rs.finish(started, rs.FAILED, f"backup {request.name} is gone or not completed")
    if (backup.get("spec") or {}).get("clusterId") != cluster:
        return rs.finish(started, rs.FAILED, f"backup {request.name} is another cluster's")
    return started


async def _step(
    kube: AsyncClient, runtime: ControlPlaneRuntime, plan: manifests.Plan, current: rs.Record
) -> rs.Record:
    restore = current.restore
    assert restore is not None
    cluster = plan.cluster
    if restore.phase == rs.SHUTDOWN:
        return current.moved(rs.RESTORE) if await _stopped(kube, cluster) else current
    if restore.phase == rs.RESTORE:
        name = backups.restore_job_name(restore.generation)
        job = await get(kube, Job, name, cluster)
        if job is None:
            return await _restore_job(kube, plan, current, name)
        outcome = backups.job_outcome(job)
        if outcome is None:
            if _downloads(job):
                await _keep_keys(kube, plan, restore.name, job)
            return current
        if not outcome:
            said = await failure(kube, name, cluster)
            await delete_job(kube, name, cluster)
            return rs.finish(current, rs.FAILED, said)
        # The Job stays until the restore has finished: were it gone while the record still
        # said Restore (an operator stopped before writing Restart), it would be made again.
        return current.moved(rs.RESTART)
    if restore.phase == rs.RESTART:
        seen = await runtime.observe(cluster)
        if not (seen.ready and await _scaled_up(kube, cluster)):
            return current
        await delete_job(kube, backups.restore_job_name(restore.generation), cluster)
        return rs.finish(current, rs.FINISHED)
    return current


async def _restore_job(
    kube: AsyncClient, plan: manifests.Plan, current: rs.Record, name: str
) -> rs.Record:
    """The restore Job; for a backup in S3, with the Secret of the target's keys it owns."""
    restore = current.restore
    assert restore is not None
    backup = await get(kube, kinds.EtcdBackup, restore.name, plan.cluster)
    status = (backup or {}).get("status") or {}
    try:
        target = s3.recorded(status)
        keys = None if target is None else await s3_keys(kube, plan.release, target)
    except Invalid as exc:
        return rs.finish(current, rs.FAILED, f"the backup's S3 target: {exc.message}")
    job = backups.restore_job(
        plan, restore.name, restore.generation, target, str(status.get("sha256") or "")
    )
    made = await apply(kube, job)
    if keys is not None:
        await apply(kube, backups.s3_secret(plan.cluster, name, made["metadata"]["uid"], keys))
    return current


def _downloads(job: Mapping[str, Any]) -> bool:
    volumes = job["spec"]["template"]["spec"].get("volumes") or []
    return any(v.get("name") == "s3" for v in volumes)


async def _keep_keys(
    kube: AsyncClient, plan: manifests.Plan, backup: str, job: dict[str, Any]
) -> None:
    found = await get(kube, kinds.EtcdBackup, backup, plan.cluster)
    target = s3.recorded((found or {}).get("status") or {})
    if target is not None:
        await keep_keys(kube, job, plan.release, target)


async def _stopped(kube: AsyncClient, cluster: str) -> bool:
    """Both workloads are at 0 replicas and none of their pods is left."""
    for kind, name in ((StatefulSet, "etcd"), (Deployment, manifests.CONTROL_PLANE)):
        found = await get(kube, kind, name, cluster)
        if found is not None and int(found["spec"].get("replicas", 1)) != 0:
            return False
    async for pod in kube.list(Pod, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}):
        component = (
            (pod.metadata.labels or {}).get(manifests.COMPONENT_LABEL) if pod.metadata else None
        )
        if component in STOPPED_COMPONENTS:
            return False
    return True


async def _scaled_up(kube: AsyncClient, cluster: str) -> bool:
    """etcd runs on the restored data: its StatefulSet has rolled to the template that names it
    (a Ready count left from before would not do)."""
    found = await get(kube, StatefulSet, "etcd", cluster)
    if found is None:
        return False
    status = found.get("status") or {}
    return (
        int(found["spec"].get("replicas", 0)) >= 1
        and int(status.get("observedGeneration") or 0) >= found["metadata"].get("generation", 0)
        and status.get("currentRevision") == status.get("updateRevision")
        and int(status.get("readyReplicas") or 0) >= 1
    )
