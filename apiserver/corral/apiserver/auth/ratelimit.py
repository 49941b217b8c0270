"""Requests per minute per user, held across every API server replica (spec 8).

Windows are the minutes of the wall clock, the same on every replica. What a user may still
do in a window is a count in one shared record (`auth.ledger`), which replicas take from in
*reservations*: a replica reserves a few requests at a time (a tenth of the limit at most, a
quarter of what is left when that is less, at least one) by a conditional write, and serves
requests from its reservation without asking again. So the replicas together never serve more
than the limit, and a user costs their replica one write per reservation, not per request:
one a minute for a light user. The price is that requests reserved by one replica and not
used there are lost to the others: a client whose requests all reach one replica can be
refused early by what the other replicas hold unused, at most a tenth of the limit each.

A reservation is made under one limit. When the setting changes, each replica gives back what
it reserved under the old limit and has not used, in the window it was reserved in, and
reserves afresh under the new one: the record then counts what was served and what is held
under the limit in force, never requests reserved and abandoned. A replica gives back as soon
as it sees the change (its own write, or the watch), for every user it holds requests of, and
for a user with a request in hand in the same write as its next reservation. Until a replica
has seen a change it keeps to the limit it knows, so for that moment it may refuse what the
others, on the new limit, would serve. A replica that stops (a rolling upgrade, a scale-down)
gives back all it holds as it goes; one that dies leaves its reservations counted until the
window ends.

Should the shared record be out of reach (the management cluster not answering), a replica
counts on its own for the rest of the window, as if it were alone: the limit then holds per
replica until the record answers again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

log = logging.getLogger(__name__)

SETTING = "api-rate-limit-per-minute"
WINDOW_SECONDS = 60
# Fractions of the limit, and of what is left of it, a replica reserves at a time.
MAX_SHARE = 10
LEFT_SHARE = 4
# The shared record unreachable is logged at most this often.
OUTAGE_LOG_SECONDS = 60.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    @cached_property
    def headers(self) -> dict[str, str]:
        """Shared by every answer the decision serves (an unlimited one serves a second's):
        copied into each, never changed."""
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_seconds),
        }


def window_of(now: float) -> int:
    """The minute of the wall clock `now` (seconds since the epoch) falls in."""
    return int(now // WINDOW_SECONDS)


def reset_seconds(window: int, now: float) -> int:
    """Seconds until the window ends, at least 1."""
    return max(1, math.ceil((window + 1) * WINDOW_SECONDS - now))


def reservation(limit: int, used: int) -> int:
    """How many requests a replica reserves when `used` of `limit` are taken: 0 when none
    are left."""
    left = limit - used
    if left <= 0:
        return 0
    return max(1, min(left // LEFT_SHARE, math.ceil(limit / MAX_SHARE)))


@dataclass(frozen=True)
class Grant:
    """What a reservation got: the window it counts in (a replica whose clock lags takes the
    record's), how many requests, and how many of the window's the record holds taken."""

    window: int
    granted: int
    used: int


class Ledger(Protocol):
    """The shared record of each user's window."""

    async def reserve(self, user: str, window: int, limit: int, returned: int = 0) -> Grant:
        """Reserve under `limit`, first giving back `returned` requests this replica reserved
        in `window` and did not use (they count only while the record is still of `window`).
        A limit of 0 reserves nothing: the write only gives back."""
        ...

    def prune(self, window: int) -> None: ...


@dataclass
class _Window:
    """One replica's view of one user's window."""

    window: int
    limit: int  # the limit the reservation was made under
    left: int = 0  # reserved by this replica and not yet used
    returning: int = 0  # reserved under an earlier limit, unused, not yet given back
    used: int = 0  # taken in the shared record, as of this replica's last reservation
    served: int = 0  # served by this replica
    exhausted: bool = False
    alone: bool = False  # the record is out of reach: counting on our own


class RateLimiter:
    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._windows: dict[str, _Window] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._outage_logged = -math.inf
        self._limit: int | None = None  # the limit this replica last settled for
        self._unlimited: tuple[int, Decision] | None = None  # the second's, when unlimited

    async def hit(self, user: str, limit: int, now: float) -> Decision:
        """Count one request of `user` at wall-clock time `now`; a limit of 0 or less means
        unlimited (and costs nothing)."""
        if limit <= 0:
            return self.unlimited(now)
        window = window_of(now)
        state = self._current(user, window, limit)
        if state.left <= 0 and not state.exhausted:
            # One reservation at a time per user: requests that arrive meanwhile wait for it
            # and are served from it.
            lock = self._locks.setdefault(user, asyncio.Lock())
            async with lock:
                state = self._current(user, window, limit)
                if state.left <= 0 and not state.exhausted:
                    await self._reserve(user, state, limit)
        if state.left <= 0:
            return Decision(False, limit, 0, reset_seconds(state.window, now))
        state.left -= 1
        state.served += 1
        remaining = max(0, limit - state.used) + state.left
        return Decision(True, limit, remaining, reset_seconds(state.window, now))

    def unlimited(self, now: float) -> Decision:
        """The decision when there is no limit: `hit` with a limit of 0, without a coroutine.
        Every request of one second of the clock gets the same decision: its
        reset is `reset_seconds` of that whole second. So it is made once a second."""
        second = math.floor(now)
        if self._unlimited is None or self._unlimited[0] != second:
            decision = Decision(True, 0, 0, reset_seconds(window_of(now), now))
            self._unlimited = (second, decision)
        return self._unlimited[1]

    def _current(self, user: str, window: int, limit: int) -> _Window:
        state = self._windows.get(user)
        if state is None or state.window < window:
            state = self._windows[user] = _Window(window, limit)
        elif state.limit != limit:
            _change_limit(state, limit)
        return state

    async def _reserve(self, user: str, state: _Window, limit: int) -> None:
        if state.alone:
            self._count_alone(state, limit)
            return
        returned = state.returning
        try:
            grant = await self._ledger.reserve(user, state.window, limit, returned)
        except Exception as exc:  # noqa: BLE001 - any failure of the record: count alone
            self._outage(exc)
            state.alone = True
            self._count_alone(state, limit)
            return
        state.returning -= returned
        state.window = max(state.window, grant.window)
        state.used = grant.used
        state.left = grant.granted
        state.exhausted = grant.granted == 0

    async def settle(self, limit: int, now: float) -> None:
        """The limit is now `limit`: give back what this replica holds reserved under another
        (a user with a request in hand gives back with its next reservation instead). Runs
        when the setting changes; a no-op when it has not."""
        if limit == self._limit:
            return
        self._limit = limit
        await self._give_back(now, limit)

    async def release(self, now: float) -> None:
        """This replica stops serving: give back all it holds reserved, to the replicas that
        go on. (One that dies without this leaves its reservations counted until the window
        ends.)"""
        await self._give_back(now, None)

    async def _give_back(self, now: float, limit: int | None) -> None:
        """Give back to the record what this replica holds unused in the current window: what
        it reserved under a limit other than `limit`, or all of it (None). One write per user
        holding any; the record out of reach keeps it held."""
        window = window_of(now)
        for user, state in list(self._windows.items()):
            if state.window < window or state.alone or state.limit == limit:
                continue
            lock = self._locks.setdefault(user, asyncio.Lock())
            async with lock:
                if self._windows.get(user) is not state or state.limit == limit:
                    continue  # a request of the user took it over meanwhile
                _change_limit(state, state.limit if limit is None else limit)
                returned = state.returning
                if not returned:
                    continue
                try:
                    await self._ledger.reserve(user, state.window, 0, returned)
                except Exception as exc:  # noqa: BLE001 - the record's outage: kept for later
                    self._outage(exc)
                    continue
                state.returning -= returned

    @staticmethod
    def _count_alone(state: _Window, limit: int) -> None:
        state.left = max(0, limit - state.served)
        state.used = limit
        state.exhausted = state.left == 0

    def _outage(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._outage_logged >= OUTAGE_LOG_SECONDS:
            self._outage_logged = now
            log.warning("rate limit record out of reach, counting per replica: %s", exc)

    def prune(self, now: float) -> None:
        """Drop finished windows so idle users cost no memory."""
        window = window_of(now)
        self._windows = {u: w for u, w in self._windows.items() if w.window >= window}
        self._ledger.prune(window)
        self._locks = {
            u: lock for u, lock in self._locks.items() if u in self._windows or lock.locked()
        }


def _change_limit(state: _Window, limit: int) -> None:
    """The setting changed: what was reserved under the old limit and not used is to be given
    back, and the next request reserves under the new one."""
    state.returning += state.left
    state.limit, state.left, state.exhausted = limit, 0, False
