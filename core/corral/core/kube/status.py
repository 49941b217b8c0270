"""The one way status is written: server-side apply on the status subresource, one field
manager per controller ("corral-cluster-health", "corral-node-mirror", "corral-drain", …).

Each controller applies only the condition types and status fields it owns; `status.conditions`
is a list-map keyed by `type` in every CRD, so the API server merges one manager's conditions
beside another's and none can erase what another owns. Applying with force takes a field over
from whoever wrote it before, and a field or condition a manager applied once and leaves out
later is removed: what a controller applies is the whole of what it says.

Conditions are computed against the object as last seen (`corral.core.conditions.merge`):
`lastTransitionTime` stays while the status does not change, `observedGeneration` is the
generation seen. A write is skipped when the object already holds exactly what the manager
would apply (read from its `managedFields`).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lightkube import AsyncClient
from lightkube.types import PatchType

from corral.core.conditions import Condition, merge
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj

Clock = Callable[[], datetime.datetime]


class StatusWriter:
    def __init__(self, client: AsyncClient, manager: str, clock: Clock) -> None:
        self._client = client
        self.manager = manager
        self._clock = clock

    async def apply(
        self,
        kind: Any,
        name: str,
        namespace: str | None = None,
        *,
        seen: Obj,
        conditions: Sequence[Condition] = (),
        fields: Mapping[str, Any] | None = None,
    ) -> Obj | None:
        """Apply this manager's part of the status of `kind` `name`: these conditions and
        fields, and nothing else. The object as written, or None when nothing changed."""
        status = owned_status(seen, conditions, fields or {}, self._clock())
        if holds(seen, self.manager, status):
            return None
        written = await self._client.patch(
            kind.Status,
            name,
            apply_body(kind, name, namespace, status),
            namespace=namespace,
            patch_type=PatchType.APPLY,
            field_manager=self.manager,
            force=True,
        )
        return as_dict(written)


def owned_status(
    seen: Obj,
    observed: Sequence[Condition],
    fields: Mapping[str, Any],
    now: datetime.datetime,
) -> dict[str, Any]:
    """The status a manager applies: its fields, and its conditions merged into those seen."""
    status = dict(fields)
    if observed:
        types = {c.type for c in observed}
        current = (seen.get("status") or {}).get("conditions") or []
        generation = seen["metadata"].get("generation")
        merged = merge(current, observed, now, generation)
        status["conditions"] = [c for c in merged if c["type"] in types]
    return status


def apply_body(kind: Any, name: str, namespace: str | None, status: Obj) -> Obj:
    resource = kind._api_info.resource
    api_version = f"{resource.group}/{resource.version}" if resource.group else resource.version
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": resource.kind, "metadata": metadata,
            "status": status}  # fmt: skip


def holds(seen: Obj, manager: str, status: Obj) -> bool:
    """Whether `seen` already holds exactly `status` as `manager`'s: the manager owns these
    fields and condition types and no others, and each has the value it would apply."""
    owned = owned_by(seen, manager)
    if owned is None:
        return False
    fields, types = owned
    applied = status.get("conditions") or []
    if fields != set(status) - {"conditions"} or types != {c["type"] for c in applied}:
        return False
    current = seen.get("status") or {}
    if any(current.get(k) != v for k, v in status.items() if k != "conditions"):
        return False
    by_type = {c.get("type"): c for c in current.get("conditions") or []}
    return all(by_type.get(c["type"]) == c for c in applied)


def owned_by(seen: Obj, manager: str) -> tuple[set[str], set[str]] | None:
    """The status fields and condition types `manager` owns through apply, from the object's
    managedFields; None when it owns nothing there."""
    for entry in seen["metadata"].get("managedFields") or []:
        if (entry.get("manager"), entry.get("operation"), entry.get("subresource")) != (
            manager, "Apply", "status",
        ):  # fmt: skip
            continue
        owned = (entry.get("fieldsV1") or {}).get("f:status") or {}
        fields = {k[2:] for k in owned if k.startswith("f:") and k != "f:conditions"}
        types = {
            json.loads(k[2:]).get("type")
            for k in owned.get("f:conditions") or {}
            if k.startswith("k:")
        }
        return fields, types
    return None
