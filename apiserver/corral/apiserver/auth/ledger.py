"""The shared record of each user's rate-limit window: a ConfigMap
`svc-system/ratelimit-<user id>` holding the window (the minute of the wall clock) and how
many of its requests the API server replicas have reserved (`auth.ratelimit`).

A reservation is a read-modify-write made conditional on the record's resourceVersion, so of
two replicas reserving at once one is refused and reads again: no request is counted twice
or lost; what a replica gives back unused (when the limit changes) is taken off in the same
kind of write. Each replica remembers the record as it last wrote it and writes on that, so a
user served by one replica costs one write per reservation and no read. The record is owned
by the User, and goes with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

from corral.apiserver.auth.ratelimit import Grant, reservation
from corral.core.api import names
from corral.core.kube.client import as_dict

LABEL_RATE_LIMIT = "management.svc.io/rate-limit"
# Writes refused by another replica's before this one gives up (and counts alone).
ATTEMPTS = 8

# The user's uid, for the record's owner reference; None for a user not (or no longer) known.
OwnerUid = Callable[[str], str | None]


def record_name(user: str) -> str:
    return f"ratelimit-{user}"


class KubeLedger:
    def __init__(self, kube: AsyncClient, owner_uid: OwnerUid) -> None:
        self._kube = kube
        self._owner_uid = owner_uid
        self._seen: dict[str, dict[str, Any]] = {}  # the record as this replica last saw it

    async def reserve(self, user: str, window: int, limit: int, returned: int = 0) -> Grant:
        for _ in range(ATTEMPTS):
            record = self._seen.get(user) or await self._read(user)
            if record is None:
                granted = reservation(limit, 0)
                grant = Grant(window, granted, granted)
                if granted == 0 or await self._create(user, grant):
                    return grant
                continue
            data = record.get("data") or {}
            stored_window, used = _number(data.get("window")), _number(data.get("used"))
            if stored_window < window:
                stored_window, used = window, 0
            elif stored_window == window:
                # Given back only to the window they were reserved in: a record already of a
                # later one never counted them.
                used = max(0, used - returned)
            granted = reservation(limit, used)
            grant = Grant(stored_window, granted, used + granted)
            if _data(grant) == data or await self._update(user, record, grant):
                return grant
        raise RuntimeError(f"the rate limit record of {user} kept changing")

    async def _read(self, user: str) -> dict[str, Any] | None:
        try:
            found = await self._kube.get(
                ConfigMap, record_name(user), namespace=names.SYSTEM_NAMESPACE
            )
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        record = as_dict(found)
        self._seen[user] = record
        return record

    async def _create(self, user: str, grant: Grant) -> bool:
        """Whether the record was made with this grant; False when another replica made it
        first (it is read again)."""
        uid = self._owner_uid(user)
        owners = (
            [OwnerReference(apiVersion=names.API_VERSION, kind=names.USER.kind, name=user, uid=uid)]
            if uid
            else None
        )
        meta = ObjectMeta(
            name=record_name(user),
            namespace=names.SYSTEM_NAMESPACE,
            labels={LABEL_RATE_LIMIT: "true", names.LABEL_MANAGED_BY: names.MANAGED_BY},
            ownerReferences=owners,
        )
        try:
            made = await self._kube.create(ConfigMap(metadata=meta, data=_data(grant)))
        except ApiError as exc:
            if exc.status.code != 409:
                raise
            self._seen.pop(user, None)
            return False
        self._seen[user] = as_dict(made)
        return True

    async def _update(self, user: str, record: dict[str, Any], grant: Grant) -> bool:
        """Whether the record took the grant; False when it changed since it was read (it is
        read again)."""
        change = [
            {"op": "replace", "path": "/metadata/resourceVersion",
             "value": record["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/data", "value": _data(grant)},
        ]  # fmt: skip
        try:
            written = await self._kube.patch(
                ConfigMap, record_name(user), change,
                namespace=names.SYSTEM_NAMESPACE, patch_type=PatchType.JSON,
            )  # fmt: skip
        except ApiError as exc:
            if exc.status.code not in (404, 409):
                raise
            self._seen.pop(user, None)
            return False
        self._seen[user] = as_dict(written)
        return True

    def prune(self, window: int) -> None:
        """Forget the records of users not seen since the window before `window`: a record
        remembered saves a read only while no other replica has written it."""
        self._seen = {
            u: r
            for u, r in self._seen.items()
            if _number((r.get("data") or {}).get("window")) >= window - 1
        }


def _data(grant: Grant) -> dict[str, str]:
    return {"window": str(grant.window), "used": str(grant.used)}


def _number(text: Any) -> int:
    """A count from the record; anything unreadable (written by hand) counts as 0."""
    try:
        return max(0, int(text))
    except (TypeError, ValueError):
        return 0
