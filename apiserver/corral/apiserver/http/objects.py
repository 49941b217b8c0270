"""What a `/v3` resource shows of the Kubernetes object behind it."""

from __future__ import annotations

from typing import Any

from corral.core import times
from corral.core.kube.informer import Obj


def name_of(obj: Obj) -> str:
    """The id of a resource backed by an object outside any namespace: its name."""
    name: str = obj["metadata"]["name"]
    return name


def meta_fields(obj: Obj) -> dict[str, Any]:
    """The metadata every resource shows: id, creation time, uid."""
    meta = obj["metadata"]
    return {
        "id": name_of(obj),
        "created": times.format_time(times.parse_time(meta["creationTimestamp"])),
        "uuid": meta.get("uid", ""),
    }


def object_stamp(obj: Obj) -> dict[str, Any]:
    """A custom resource's creation time and uid, as the resource backed by it shows them."""
    meta = obj["metadata"]
    return {"created": meta.get("creationTimestamp", ""), "uuid": meta.get("uid", "")}


def object_fields(obj: Obj, metadata: tuple[str, ...]) -> dict[str, Any]:
    """What a resource backed by a custom resource shows of it after its own fields and stamp:
    the named metadata keys, spec and status."""
    meta = obj["metadata"]
    return {
        "metadata": {k: meta[k] for k in metadata if k in meta},
        "spec": obj.get("spec") or {},
        "status": shown_status(obj.get("status") or {}),
    }


def shown_status(status: dict[str, Any]) -> dict[str, Any]:
    """The status with its conditions sorted by type. Each controller server-side applies only
    its own conditions, and Kubernetes keeps a list-map in the order keys were first applied,
    so the stored order depends on which controller wrote first (a drained node's `Drained`
    lands last); clients get one order whatever the history."""
    found = status.get("conditions")
    if not found:
        return status
    return {**status, "conditions": sorted(found, key=lambda c: str(c.get("type", "")))}
