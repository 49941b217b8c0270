"""Tokens: record when each expires, and purge the expired ones (spec 3.1)."""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from corral.core import resources, settings
from corral.core.auth import ttl
from corral.core.kube import as_dict, delete_if_present

log = logging.getLogger(__name__)

PURGE_SETTING = "token-purge-interval-minutes"
PURGE_TICK_SECONDS = 2.0


def expiry_status(
    spec: Mapping[str, Any], created: str, status: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The status a token should have, or None when it already has it."""
    ttl_ms = int(spec.get("ttlMillis", 0))
    if ttl_ms == 0 or status.get("expiresAt"):
        return None
    expiry = ttl.expires_at(ttl.parse_time(created), ttl_ms)
    assert expiry is not None
    return {"expiresAt": ttl.format_time(expiry), "expired": False}


def expired(tokens: Iterable[Mapping[str, Any]], now: datetime.datetime) -> list[str]:
    """Names of the tokens whose lifetime is over. System tokens never expire."""
    names = []
    for token in tokens:
        meta, spec = token["metadata"], token.get("spec", {})
        if (meta.get("labels") or {}).get(resources.LABEL_TOKEN_KIND) == resources.KIND_SYSTEM:
            continue
        created = ttl.parse_time(meta["creationTimestamp"])
        if ttl.is_expired(created, int(spec.get("ttlMillis", 0)), now):
            names.append(meta["name"])
    return names


# An event handler, not a create handler: it keeps no state of its own on the object, so a
# new token costs exactly one status write.
@kopf.on.event(resources.GROUP, resources.VERSION, "tokens")
async def record_expiry(type: str, name: str, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    if type == "DELETED":
        return
    status = expiry_status(body.spec, body.metadata["creationTimestamp"], body.status)
    if status is None:
        return
    kube: AsyncClient = memo.kube
    try:
        await kube.patch(resources.Token.Status, name, {"status": status},
                         patch_type=PatchType.MERGE)  # fmt: skip
    except ApiError as exc:
        if exc.status.code != 404:
            raise


@kopf.daemon(resources.GROUP, resources.VERSION, "settings",
             when=lambda name, **_: name == PURGE_SETTING)  # fmt: skip
async def purge_expired_tokens(
    stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **_: Any
) -> None:
    """Runs on the active operator replica only (kopf peering), every purge interval.

    The interval is re-read from the setting (kopf keeps `body` current) on every short tick,
    so a changed interval applies without waiting out the old one.
    """
    kube: AsyncClient = memo.kube
    last = -math.inf
    while not stopped:
        if time.monotonic() - last >= interval_seconds(body):
            await purge(kube, datetime.datetime.now(datetime.UTC))
            last = time.monotonic()
        await stopped.wait(PURGE_TICK_SECONDS)


def interval_seconds(setting: Mapping[str, Any]) -> float:
    value = (
        setting.get("value") or setting.get("default") or settings.CATALOG[PURGE_SETTING].default
    )
    try:
        return settings.as_number(PURGE_SETTING, value) * 60
    except settings.SettingValueError:
        return float(settings.CATALOG[PURGE_SETTING].default) * 60


async def purge(kube: AsyncClient, now: datetime.datetime) -> int:
    tokens = [as_dict(t) async for t in kube.list(resources.Token)]
    names = expired(tokens, now)
    for name in names:
        await delete_if_present(kube, resources.Token, name)
    if names:
        log.info("purged %d expired tokens", len(names))
    return len(names)
