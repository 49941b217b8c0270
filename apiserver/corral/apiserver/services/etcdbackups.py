"""etcd backups of provisioned clusters (docs/api.md, "etcd backups"): the two cluster actions
that make and use one, `backupEtcd` and `restoreFromEtcdBackup`, and a backup's removal. The
operator takes the snapshot and carries the restore out; these only check and write what was
asked.
"""

from __future__ import annotations

import datetime
from typing import Any

from lightkube import ApiError as KubeError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.services import clusters
from corral.apiserver.services.visibility import require_cluster_owner
from corral.core import errors, jsonpatch
from corral.core.api import names
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj, key_of
from corral.core.provisioning import backups
from corral.core.provisioning import restore as rs


def _restoring(obj: Obj) -> bool:
    current = rs.record((obj.get("status") or {}).get("provisioning"))
    return rs.pending(rs.requested(obj.get("spec") or {}), current)


async def backup(deps: Deps, cluster: Obj) -> Obj:
    """A new EtcdBackup of a provisioned, Ready cluster; the operator takes it."""
    clusters.require_provisioned(cluster, "backupEtcd")
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
        created = as_dict(await deps.kube.create(obj))
    except KubeError as exc:
        if exc.status.code == 409:
            raise errors.conflict("a backup was taken this second; ask again") from None
        raise
    deps.stores.etcdbackups.put(created)
    return created


async def restore(deps: Deps, cluster: Obj, body: dict[str, Any]) -> Obj:
    """Write the restore request into the cluster's spec, with what the mode restores; 422
    naming the field (and nothing written) when the backup is not a completed one of this
    cluster's. The cluster as written."""
    clusters.require_provisioned(cluster, "restoreFromEtcdBackup")
    name = cluster["metadata"]["name"]
    asked = backups.restore_request(name, body)

    async def decide(cluster: Obj) -> list[jsonpatch.Operation]:
        if _restoring(cluster):
            raise errors.invalid(
                asked.field, f"a restore of cluster {name} is under way", code="InvalidAction"
            )
        found = deps.stores.etcdbackups.get(f"{name}/{asked.name}")
        backups.check_backup(name, asked, found)
        assert found is not None
        spec = cluster.get("spec") or {}
        restored = backups.restored_spec(spec["driver"], asked.mode, found, deps.stores.catalog())
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
    return await clusters.write(deps, name, decide, rs.READS)


def may_delete(who: Caller, obj: Obj) -> None:
    """A backup is removed by its cluster's owners only."""
    require_cluster_owner(who, obj["metadata"]["namespace"], "delete its etcd backups")


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    may_delete(who, obj)
    meta = obj["metadata"]
    await delete_if_present(deps.kube, kinds.EtcdBackup, meta["name"], meta["namespace"])
    deps.stores.etcdbackups.forget(key_of(obj))
