"""One user per username, whoever creates them and however many at once.

A username is claimed by a ConfigMap `svc-system/username-<hash of the username>` made before
its User: of two users created at once with one username, Kubernetes refuses the second claim
(a look at the users first could not tell). Once the User exists it owns the claim, which so
goes with the user. A claim whose user is gone, or whose user never came because its request
died on the way, is taken over (with a resourceVersion precondition, so by one taker only).
"""

from __future__ import annotations

import datetime
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

from corral.core.api import ids, names
from corral.core.errors import Conflict
from corral.core.kube import kinds
from corral.core.kube.client import as_dict

LABEL_CLAIM = "management.svc.io/username-claim"
# How long a claim waits for its User before another request may take it over.
GRACE = datetime.timedelta(seconds=60)


class UsernameTaken(Conflict):
    """409 `AlreadyExists` (spec 7: 409 is "resource already exists")."""

    def __init__(self) -> None:
        super().__init__("Username is already in use.", "username")


def claim_name(username: str) -> str:
    return ids.derived("username", username, length=16)


async def claim(kube: AsyncClient, username: str, user_id: str) -> None:
    """Claims `username` for the user `user_id` (not yet created, or created already: claiming
    again is a no-op). UsernameTaken when another user has it."""
    name = claim_name(username)
    data = _data(username, user_id)
    try:
        await kube.create(
            ConfigMap(
                metadata=ObjectMeta(
                    name=name, namespace=names.SYSTEM_NAMESPACE, labels={LABEL_CLAIM: "true"}
                ),
                data=data,
            )
        )
        return
    except ApiError as exc:
        if exc.status.code != 409:
            raise
    existing = await _get(kube, name)
    if existing is not None and (existing.get("data") or {}).get("userId") == user_id:
        return
    if existing is None or not await _stale(kube, existing):
        raise UsernameTaken
    takeover = [
        {"op": "replace", "path": "/metadata/resourceVersion",
         "value": existing["metadata"]["resourceVersion"]},
        {"op": "replace", "path": "/data", "value": data},
        {"op": "add", "path": "/metadata/ownerReferences", "value": []},
    ]  # fmt: skip
    try:
        await kube.patch(
            ConfigMap, name, takeover, namespace=names.SYSTEM_NAMESPACE,
            patch_type=PatchType.JSON,
        )  # fmt: skip
    except ApiError as exc:
        if exc.status.code in (404, 409):  # someone else took it, or it went meanwhile
            raise UsernameTaken from None
        raise


async def own(kube: AsyncClient, username: str, user_id: str, user_uid: str) -> None:
    """The User now exists: it owns its claim, which goes when it goes."""
    owner = {
        "apiVersion": names.API_VERSION, "kind": names.USER.kind,
        "name": user_id, "uid": user_uid,
    }  # fmt: skip
    await kube.patch(
        ConfigMap, claim_name(username), {"metadata": {"ownerReferences": [owner]}},
        namespace=names.SYSTEM_NAMESPACE, patch_type=PatchType.MERGE,
    )  # fmt: skip


async def release(kube: AsyncClient, username: str, user_id: str) -> None:
    """Gives the claim up, if `user_id` holds it (its User could not be created)."""
    existing = await _get(kube, claim_name(username))
    if existing is None or (existing.get("data") or {}).get("userId") != user_id:
        return
    try:
        await kube.delete(ConfigMap, claim_name(username), namespace=names.SYSTEM_NAMESPACE)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


async def _stale(kube: AsyncClient, existing: dict[str, Any]) -> bool:
    """Whether the claim's user is gone, or never came and will not any more."""
    holder = (existing.get("data") or {}).get("userId")
    if holder:
        try:
            await kube.get(kinds.User, holder)
            return False
        except ApiError as exc:
            if exc.status.code != 404:
                raise
    if existing["metadata"].get("ownerReferences"):
        return True  # its User existed and is gone; garbage collection is on its way
    try:
        since = datetime.datetime.fromisoformat((existing.get("data") or {})["claimedAt"])
    except (KeyError, TypeError, ValueError):
        return True
    return since.tzinfo is None or abs(_now() - since) > GRACE


async def _get(kube: AsyncClient, name: str) -> dict[str, Any] | None:
    try:
        return as_dict(await kube.get(ConfigMap, name, namespace=names.SYSTEM_NAMESPACE))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


def _data(username: str, user_id: str) -> dict[str, str]:
    return {
        "username": username,
        "userId": user_id,
        "claimedAt": _now().isoformat(timespec="seconds"),
    }


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
