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
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from corral.core.auth import ttl

log = logging.getLogger(__name__)

TICK_SECONDS = 1.0

Writer = Callable[[str, datetime.datetime], Awaitable[None]]


# How long after its latest use was written a token's memory is kept: by then the token's
# object, as the watch brings it, carries that use itself.
FORGET_AFTER = datetime.timedelta(hours=1)


class ActivityTracker:
    """Each tick looks only at the tokens used since their use was last written, not at every
    token ever used: with 100,000 tokens seen, a walk of all of them each second held the
    event loop for tens of milliseconds."""

    def __init__(self, write: Writer) -> None:
        self._write = write
        # Each token's latest use, least recently used first.
        self._seen: OrderedDict[str, datetime.datetime] = OrderedDict()
        self._written: dict[str, datetime.datetime] = {}  # when we last wrote, by token
        self._unwritten: dict[str, None] = {}  # tokens used since their last write, in order

    def touch(self, token: str, now: datetime.datetime) -> None:
        self._seen[token] = now
        self._seen.move_to_end(token)
        self._unwritten[token] = None

    def last_seen(
        self, token: str, persisted: datetime.datetime | None
    ) -> datetime.datetime | None:
        mine = self._seen.get(token)
        if mine is None or persisted is None:
            return mine or persisted
        return max(mine, persisted)

    def forget(self, token: str) -> None:
        """A token revoked: no write of its use is owed any more."""
        self._seen.pop(token, None)
        self._written.pop(token, None)
        self._unwritten.pop(token, None)

    def due(
        self, now: datetime.datetime, idle_minutes: float
    ) -> list[tuple[str, datetime.datetime]]:
        """Tokens whose latest use should be written now."""
        interval = ttl.activity_write_interval(idle_minutes)
        due = []
        for token in self._unwritten:
            written = self._written.get(token)
            if written is None or now - written >= interval:
                due.append((token, self._seen[token]))
        return due

    async def flush(self, now: datetime.datetime, idle_minutes: float) -> None:
        for token, _ in self.due(now, idle_minutes):
            if token not in self._unwritten:
                continue  # revoked (`forget`) while an earlier token's write was on its way
            # Its latest use: one while an earlier token's write was on its way counts too.
            seen = self._seen[token]
            self._written[token] = now
            # A use while this write is on its way is owed a write of its own.
            del self._unwritten[token]
            try:
                await self._write(token, seen)
            except Exception as exc:  # noqa: BLE001 - a lost write only delays the record
                log.warning("could not record activity of token %s: %s", token, exc)

    def prune(self, now: datetime.datetime) -> None:
        """Forget tokens whose latest use was written over FORGET_AFTER ago (deleted tokens
        among them), oldest first: the walk stops at the first one still remembered."""
        while self._seen:
            token, seen = next(iter(self._seen.items()))
            if token in self._unwritten or now - seen <= FORGET_AFTER:
                return
            del self._seen[token]
            self._written.pop(token, None)

    async def run(self, idle_minutes: Callable[[], float]) -> None:
        """Tick after tick, until cancelled. A tick that fails is logged and the next one
        goes on: a writer that stopped would leave every later use unwritten, and the other
        replicas would judge live sessions idle."""
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                await self.flush(datetime.datetime.now(datetime.UTC), idle_minutes())
            except Exception:  # see above: the next tick tries what is owed
                log.exception("recording token activity failed; trying again at the next tick")
