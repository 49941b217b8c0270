"""Tokens: record when each expires and, once it has, that it has (status, as the field
manager `corral-tokens`); purge the expired ones and the idle sessions (spec 3.1)."""

from __future__ import annotations

import datetime
import heapq
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient

from corral.core import settings, times
from corral.core.api import names
from corral.core.auth import ttl
from corral.core.auth.tokens import is_system_name
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.status import StatusWriter
from corral.operator.state import State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-tokens"
PURGE_SETTING = "token-purge-interval-minutes"
IDLE_SETTING = "auth-user-session-idle-ttl-minutes"
PURGE_TICK_SECONDS = 2.0

# What a malformed token (edited by hand, or stored by an older version) can raise while its
# expiry is worked out. Such a token is logged by name and skipped: it never stops the others.
MALFORMED = (KeyError, TypeError, ValueError, OverflowError)


def expiry(token: Mapping[str, Any]) -> datetime.datetime | None:
    """When a token expires; None when it never does (a ttl of 0, or a system token)."""
    meta = token["metadata"]
    if is_system_name(meta["name"]):
        return None
    created = times.parse_time(meta["creationTimestamp"])
    return ttl.expires_at(created, int((token.get("spec") or {}).get("ttlMillis", 0)))


def expiry_status(token: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any] | None:
    """The status fields this controller owns on a token, or None for a token that never
    expires."""
    when = expiry(token)
    if when is None:
        return None
    return {"expiresAt": times.format_time(when), "expired": now >= when}


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
    when = expiry(token)
    return when is not None and now >= when


def idle_sessions(
    tokens: Iterable[Mapping[str, Any]], idle_minutes: float, now: datetime.datetime
) -> list[str]:
    """Names of the session tokens idle beyond doubt: their last use, as the API servers
    wrote it down (or their creation), is older than the idle timeout plus the longest a use
    can stay unwritten. Malformed tokens are logged and skipped."""
    if idle_minutes <= 0:
        return []
    idle = []
    for token in tokens:
        try:
            meta = token["metadata"]
            if (meta.get("labels") or {}).get(names.LABEL_TOKEN_KIND) != names.KIND_SESSION:
                continue
            written = (meta.get("annotations") or {}).get(names.ANNOTATION_LAST_ACTIVITY)
            last = times.parse_time(written or meta["creationTimestamp"])
            if ttl.idle_beyond_doubt(last, idle_minutes, now):
                idle.append(meta["name"])
        except MALFORMED as exc:
            skipped(token, "not purged", exc)
    return idle


def skipped(token: Mapping[str, Any], what: str, exc: Exception) -> None:
    # The name and the reason only: the token's spec holds its (hashed) key.
    name = (token.get("metadata") or {}).get("name", "?")
    log.warning("token %s %s: %s: %s", name, what, type(exc).__name__, exc)


class ExpiryQueue:
    """The tokens still to expire, soonest first, so that `status.expired` turns true when
    each expires without a timer per token or a pass over all of them. A token queued again
    with another expiry (or forgotten) leaves its old entry behind, skipped when it comes up.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[datetime.datetime, str]] = []
        self._due: dict[str, datetime.datetime] = {}

    def add(self, name: str, when: datetime.datetime) -> None:
        if self._due.get(name) != when:
            self._due[name] = when
            heapq.heappush(self._heap, (when, name))

    def forget(self, name: str) -> None:
        self._due.pop(name, None)

    def pop_due(self, now: datetime.datetime) -> list[str]:
        """The tokens that have expired by `now`, each once."""
        due = []
        while self._heap and self._heap[0][0] <= now:
            when, name = heapq.heappop(self._heap)
            if self._due.get(name) == when:
                del self._due[name]
                due.append(name)
        return due

    def __len__(self) -> int:
        return len(self._due)


# An event handler, not a create handler: it keeps no state of its own on the object, so a
# new token costs exactly one status write (and one more when it expires).
@kopf.on.event(names.GROUP, names.VERSION, names.TOKEN.plural)
async def record_expiry(type: str, name: str, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    queue: ExpiryQueue = memo.token_expiries
    if type == "DELETED":
        queue.forget(name)
        return
    state: State = memo.state
    now = state.clock()
    try:
        status = expiry_status(body, now)
    except MALFORMED as exc:
        skipped(body, "has no recorded expiry", exc)
        return
    if status is None:
        queue.forget(name)
        return
    if not status["expired"]:
        queue.add(name, times.parse_time(status["expiresAt"]))
    await write_status(state, name, dict(body), status)


async def write_status(
    state: State, name: str, seen: dict[str, Any], status: dict[str, Any]
) -> None:
    writer = StatusWriter(state.kube, FIELD_MANAGER, state.clock)
    try:
        await writer.apply(kinds.Token, name, seen=seen, fields=status)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


async def mark_expired(state: State, queue: ExpiryQueue) -> int:
    """Turns `status.expired` true on the tokens whose time has come; returns how many."""
    marked = 0
    now = state.clock()
    for name in queue.pop_due(now):
        try:
            token = as_dict(await state.kube.get(kinds.Token, name))
            status = expiry_status(token, now)
        except ApiError as exc:
            if exc.status.code != 404:
                log.warning("token %s not marked expired: %s", name, exc.status.message)
            continue
        except MALFORMED as exc:
            skipped({"metadata": {"name": name}}, "not marked expired", exc)
            continue
        if status is None:
            continue
        if not status["expired"]:  # given a longer life meanwhile (by kubectl)
            queue.add(name, times.parse_time(status["expiresAt"]))
            continue
        await write_status(state, name, token, status)
        marked += 1
    return marked


@kopf.daemon(names.GROUP, names.VERSION, names.SETTING.plural,
             when=lambda name, **_: name == PURGE_SETTING)  # fmt: skip
async def purge_expired_tokens(
    stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **_: Any
) -> None:
    """Runs on the active operator replica only (kopf peering): marks tokens expired as they
    expire (every short tick), and purges every purge interval.

    The interval is re-read from the setting (kopf keeps `body` current) on every tick, so a
    changed interval applies without waiting out the old one.
    """
    state: State = memo.state
    queue: ExpiryQueue = memo.token_expiries
    last = -math.inf
    while not stopped:
        try:
            await mark_expired(state, queue)
            if time.monotonic() - last >= interval_seconds(body):
                last = time.monotonic()
                await purge(state.kube, state.clock(), await idle_minutes(state.kube))
        except Exception:
            # The daemon must outlive a failed pass (the API unreachable, say): the next
            # tick or interval tries again.
            log.exception("token expiry or purge pass failed")
        await stopped.wait(PURGE_TICK_SECONDS)


def interval_seconds(setting: Mapping[str, Any]) -> float:
    return settings.number(PURGE_SETTING, setting) * 60


async def idle_minutes(kube: AsyncClient) -> float:
    try:
        setting = as_dict(await kube.get(kinds.Setting, IDLE_SETTING))
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        setting = {}
    return settings.number(IDLE_SETTING, setting)


async def purge(kube: AsyncClient, now: datetime.datetime, idle_minutes: float = 0) -> int:
    """Deletes the expired tokens and the idle sessions; one that cannot be deleted is logged
    and the rest go."""
    tokens = [as_dict(t) async for t in kube.list(kinds.Token)]
    purged = 0
    for name in [*expired(tokens, now), *idle_sessions(tokens, idle_minutes, now)]:
        try:
            await delete_if_present(kube, kinds.Token, name)
        except ApiError as exc:
            log.warning("token %s not purged: %s", name, exc.status.message)
            continue
        purged += 1
    if purged:
        log.info("purged %d expired or idle tokens", purged)
    return purged
