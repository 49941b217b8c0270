"""EtcdBackups: each new one is taken once (`corral.operator.controlplane.backups`); kopf
retries the handler until the snapshot Job has finished. A backup in S3 gets kopf's finalizer
once its status says so, and its deletion removes the object first."""

from __future__ import annotations

import copy
from typing import Any

import kopf

from corral.core.api import names
from corral.core.provisioning import backups as records
from corral.operator.controlplane import backups
from corral.operator.state import State

# How soon kopf looks again at a snapshot Job that is still running.
RETRY = 2.0


@kopf.on.resume(names.GROUP, names.VERSION, names.ETCD_BACKUP.plural)
@kopf.on.create(names.GROUP, names.VERSION, names.ETCD_BACKUP.plural)
async def take_backup(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    state: State = memo.state
    await state.synced()
    if not await backups.take(state, copy.deepcopy(dict(body))):
        raise kopf.TemporaryError("the snapshot Job is running", delay=RETRY)


def _in_s3(status: kopf.Status, **_: Any) -> bool:
    return records.in_s3(status)


@kopf.on.delete(names.GROUP, names.VERSION, names.ETCD_BACKUP.plural, when=_in_s3)
async def remove_s3_object(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    state: State = memo.state
    await state.synced()
    if not await backups.remove_object(state, copy.deepcopy(dict(body))):
        raise kopf.TemporaryError("the S3 delete Job is running", delay=RETRY)
