"""A restore of a hosted control plane from an etcd backup, as a record in the cluster's
`status.provisioning` (docs/provisioning.md, "Backups and restores").

`spec.etcdSnapshotRestore {name, generation, restoreRKEConfig}` asks for a restore; the
provisioner carries out each generation once, through these phases:

- `Shutdown`: etcd and the control plane scaled to 0, until their pods are gone;
- `Restore`: the Job `etcd-restore-<generation>` restores the snapshot into `data-<generation>`;
- `Restart`: etcd on `data-<generation>` and the control plane scaled back up, until Ready;
- `Finished` (or `Failed`, with why): `restoreGeneration` is the generation.

Every phase is found again from the record and the objects' names, so an operator restarted at
any point resumes where the last one was, and never restores a generation twice.

Pure: the operator does the I/O (`corral.operator.controlplane.restore`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.provisioning import manifests

SHUTDOWN = "Shutdown"
RESTORE = "Restore"
RESTART = "Restart"
FINISHED = "Finished"
FAILED = "Failed"
DONE = (FINISHED, FAILED)
FIRST_DATA_DIR = "data-0"
GENERATION_FIELD = "restoreGeneration"
# What a request for a restore is decided from besides the spec: written on condition that it
# (and the spec, by its generation) is still as read.
READS = (("metadata", "generation"), ("status", "provisioning", GENERATION_FIELD))


@dataclass(frozen=True)
class Request:
    name: str
    generation: int
    mode: str


@dataclass(frozen=True)
class Restore:
    name: str
    generation: int
    phase: str
    message: str = ""

    @property
    def running(self) -> bool:
        return self.phase not in DONE


@dataclass(frozen=True)
class Record:
    """What `status.provisioning` keeps of restores: the data directory etcd runs on, the last
    generation done, and the restore under way or last done."""

    data_dir: str = FIRST_DATA_DIR
    generation: int = 0
    restore: Restore | None = None

    def fields(self) -> dict[str, Any]:
        found: dict[str, Any] = {"etcdDataDir": self.data_dir, GENERATION_FIELD: self.generation}
        if self.restore is not None:
            found["restore"] = dataclasses.asdict(self.restore)
        return found

    def moved(self, phase: str, message: str = "") -> Record:
        assert self.restore is not None
        return dataclasses.replace(
            self, restore=dataclasses.replace(self.restore, phase=phase, message=message)
        )


def requested(spec: Mapping[str, Any]) -> Request | None:
    given = spec.get("etcdSnapshotRestore") or {}
    if not given.get("name") or not given.get("generation"):
        return None
    return Request(
        str(given["name"]), int(given["generation"]), str(given.get("restoreRKEConfig") or "")
    )


def record(provisioning: Mapping[str, Any] | None) -> Record:
    provisioning = provisioning or {}
    found = provisioning.get("restore")
    restore = None
    if isinstance(found, Mapping) and found.get("name") and found.get("phase"):
        restore = Restore(
            str(found["name"]),
            int(found.get("generation") or 0),
            str(found["phase"]),
            str(found.get("message") or ""),
        )
    return Record(
        data_dir=str(provisioning.get("etcdDataDir") or FIRST_DATA_DIR),
        generation=int(provisioning.get(GENERATION_FIELD) or 0),
        restore=restore,
    )


def pending(request: Request | None, current: Record) -> bool:
    """A restore is asked for that has not been carried out."""
    return request is not None and request.generation != current.generation


def start(request: Request, current: Record) -> Record:
    """The record at the start of `request`, or as it was when it is already under way."""
    if current.restore is not None and current.restore.generation == request.generation:
        return current
    return dataclasses.replace(current, restore=Restore(request.name, request.generation, SHUTDOWN))


def finish(current: Record, phase: str, message: str = "") -> Record:
    """Done with the restore under way: on the new data when it finished, the old when not."""
    assert current.restore is not None
    data_dir = current.data_dir
    if phase == FINISHED:
        data_dir = f"data-{current.restore.generation}"
    return Record(
        data_dir=data_dir,
        generation=current.restore.generation,
        restore=dataclasses.replace(current.restore, phase=phase, message=message),
    )


def plan_for(plan: manifests.Plan, current: Record) -> manifests.Plan:
    """What runs in the current phase: nothing while etcd's data is replaced, the restored data
    from `Restart` on."""
    restore = current.restore
    if restore is not None and restore.phase in (SHUTDOWN, RESTORE):
        return dataclasses.replace(
            plan, etcd_data_dir=current.data_dir, etcd_replicas=0, control_plane_replicas=0
        )
    if restore is not None and restore.phase == RESTART:
        return dataclasses.replace(plan, etcd_data_dir=f"data-{restore.generation}")
    return dataclasses.replace(plan, etcd_data_dir=current.data_dir)


def message(current: Record) -> str:
    """What the cluster's `Updated` says while a restore runs."""
    restore = current.restore
    if restore is None:
        return ""
    said = {
        SHUTDOWN: "stopping etcd and the control plane",
        RESTORE: "restoring the snapshot into fresh data",
        RESTART: "starting etcd on the restored data and the control plane",
    }.get(restore.phase, restore.phase)
    text = f"restoring etcd backup {restore.name} (generation {restore.generation}): {said}"
    return f"{text}: {restore.message}" if restore.message else text
