"""When each token was last used, kept in memory and written down sparingly.

A write per request would turn every read into an etcd write. Instead each use is recorded in
memory and a background task writes the annotation `authn.management.svc.io/last-activity` at
most once a minute per token. Other replicas read that annotation from their token cache and
take the later of it and their own memory. So that an active session is never judged idle by a
replica that has not seen its latest use, the write interval is also kept under half the idle
timeout (which only matters for idle timeouts under two minutes).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable

from corral.core.auth import ttl

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0

Writer = Callable[[str, datetime.datetime], Awaitable[None]]


class ActivityTracker:
    def __init__(self, write: Writer) -> None:
        self._write = write
        self._seen: dict[str, datetime.datetime] = {}
        self._written: dict[str, datetime.datetime] = {}  # when we last wrote, by token

    def touch(self, token: str, now: datetime.datetime) -> None:
        self._seen[token] = now

    def last_seen(
        self, token: str, persisted: datetime.datetime | None
    ) -> datetime.datetime | None:
        mine = self._seen.get(token)
        if mine is None or persisted is None:
            return mine or persisted
        return max(mine, persisted)

    def forget(self, token: str) -> None:
        self._seen.pop(token, None)
        self._written.pop(token, None)

    def due(
        self, now: datetime.datetime, idle_minutes: float
    ) -> list[tuple[str, datetime.datetime]]:
        """Tokens whose latest use should be written now."""
        interval = ttl.activity_write_interval(idle_minutes)
        due = []
        for token, seen in self._seen.items():
            written = self._written.get(token)
            if written is None or (seen > written and now - written >= interval):
                due.append((token, seen))
        return due

    async def flush(self, now: datetime.datetime, idle_minutes: float) -> None:
        for token, seen in self.due(now, idle_minutes):
            self._written[token] = now
            try:
                await self._write(token, seen)
            except Exception as exc:  # noqa: BLE001 - a lost write only delays the record
                log.warning("could not record activity of token %s: %s", token, exc)

    async def run(self, idle_minutes: Callable[[], float]) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            await self.flush(datetime.datetime.now(datetime.UTC), idle_minutes())
