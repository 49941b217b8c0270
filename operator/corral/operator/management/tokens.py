"""Tokens: record when each expires (status, as the field manager `corral-tokens`), and purge
the expired ones (spec 3.1)."""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient

from corral.core.api import names, settings
from corral.core.auth import ttl
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.status import StatusWriter
from corral.operator.state import State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-tokens"
PURGE_SETTING = "token-purge-interval-minutes"
PURGE_TICK_SECONDS = 2.0

# What a malformed token (edited by hand, or stored by an older version) can raise while its
# expiry is worked out. Such a token is logged by name and skipped: it never stops the others.
MALFORMED = (KeyError, TypeError, ValueError, OverflowError)


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
    """Names of the tokens whose lifetime is over; malformed tokens are logged and skipped."""
    over = []
    for token in tokens:
        try:
            if is_expired(token, now):
                over.append(token["metadata"]["name"])
        except MALFORMED as exc:
            skipped(token, "not purged", exc)
    return over


def is_expired(token: Mapping[str, Any], now: datetime.datetime) -> bool:
    """Whether a token's lifetime is over. System tokens never expire."""
    meta, spec = token["metadata"], token.get("spec", {})
    if (meta.get("labels") or {}).get(names.LABEL_TOKEN_KIND) == names.KIND_SYSTEM:
        return False
    created = ttl.parse_time(meta["creationTimestamp"])
    return ttl.is_expired(created, int(spec.get("ttlMillis", 0)), now)


def skipped(token: Mapping[str, Any], what: str, exc: Exception) -> None:
    # The name and the reason only: the token's spec holds its (hashed) key.
    name = (token.get("metadata") or {}).get("name", "?")
    log.warning("token %s %s: %s: %s", name, what, type(exc).__name__, exc)


# An event handler, not a create handler: it keeps no state of its own on the object, so a
# new token costs exactly one status write.
@kopf.on.event(names.GROUP, names.VERSION, names.TOKEN.plural)
async def record_expiry(type: str, name: str, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    if type == "DELETED":
        return
    try:
        status = expiry_status(body.spec, body.metadata["creationTimestamp"], body.status)
    except MALFORMED as exc:
        skipped(body, "has no recorded expiry", exc)
        return
    if status is None:
        return
    state: State = memo.state
    writer = StatusWriter(state.kube, FIELD_MANAGER, state.clock)
    try:
        await writer.apply(kinds.Token, name, seen=dict(body), fields=status)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


@kopf.daemon(names.GROUP, names.VERSION, names.SETTING.plural,
             when=lambda name, **_: name == PURGE_SETTING)  # fmt: skip
async def purge_expired_tokens(
    stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **_: Any
) -> None:
    """Runs on the active operator replica only (kopf peering), every purge interval.

    The interval is re-read from the setting (kopf keeps `body` current) on every short tick,
    so a changed interval applies without waiting out the old one.
    """
    state: State = memo.state
    last = -math.inf
    while not stopped:
        if time.monotonic() - last >= interval_seconds(body):
            try:
                await purge(state.kube, state.clock())
            except Exception:
                # The daemon must outlive a failed pass (the API unreachable, say): the next
                # interval tries again.
                log.exception("token purge pass failed")
            last = time.monotonic()
        await stopped.wait(PURGE_TICK_SECONDS)


def interval_seconds(setting: Mapping[str, Any]) -> float:
    return settings.number(PURGE_SETTING, setting) * 60


async def purge(kube: AsyncClient, now: datetime.datetime) -> int:
    """Deletes the expired tokens; one that cannot be deleted is logged and the rest go."""
    tokens = [as_dict(t) async for t in kube.list(kinds.Token)]
    purged = 0
    for name in expired(tokens, now):
        try:
            await delete_if_present(kube, kinds.Token, name)
        except ApiError as exc:
            log.warning("token %s not purged: %s", name, exc.status.message)
            continue
        purged += 1
    if purged:
        log.info("purged %d expired tokens", purged)
    return purged
