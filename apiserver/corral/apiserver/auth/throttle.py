"""Slowing down password guessing.

Failures are counted per username and per client address. Past a number of free failures,
further attempts for that username (or from that address) are refused for a doubling period
without checking the password. Addresses get more free failures than usernames, because many
honest users can share one address; a success clears only the username's count, so that one
valid account does not let an address keep guessing others.

An attempt is counted as a failure *before* its password is checked (`reserve`), because the
check is awaited: counted after, any number of concurrent attempts would all pass the check
while the count still reads zero. The outcome then settles the reservation: a success clears
the username's count and gives the address its attempt back; an attempt that could not be
judged (a server error) gives both back; a wrong password keeps it (`refused`), and its
penalty runs from that moment: counted from the reservation, a check slower than the penalty
(a loaded server hashing) would let the next guess through at once. For the same reason no
penalty runs out while an attempt is still being checked (`pending`), for PENDING_HOLD at most
after the last reservation: a worker killed in the middle of a check cannot hold it longer.

The counts are held in SQLite, in a file every worker of one API server opens (`--workers`,
`workers.py`), so that N workers give an attacker the free failures of one, not N times them:
each step is one transaction (`BEGIN IMMEDIATE` takes the write lock before reading), so the
check and the count of `reserve` stay one step across processes. A step is a few microseconds
on a file nobody syncs to disk (the counts are worth nothing after a restart); it is not
awaited. Alone (no file), the counts are in memory. Each API server pod counts on its own: the
limit per username is per pod, as it always was.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from corral.apiserver.http.errors import ApiError

USER_FREE_FAILURES = 5
ADDRESS_FREE_FAILURES = 50
FIRST_PENALTY = 1.0
MAX_PENALTY = 300.0
FORGET_AFTER = 900.0
# How long a step waits for another worker's step to finish before failing.
LOCK_TIMEOUT = 5.0
# Longer than any password check takes (verification's own timeouts are shorter).
PENDING_HOLD = 60.0


class LoginThrottle:
    def __init__(self, path: Path | None = None) -> None:
        """Counts shared through the SQLite file `path` (made if missing); in memory without."""
        self._db = sqlite3.connect(
            str(path) if path else ":memory:", timeout=LOCK_TIMEOUT, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS failures"
            " (key TEXT PRIMARY KEY, count INTEGER NOT NULL, last REAL NOT NULL,"
            " pending INTEGER NOT NULL DEFAULT 0)"
        )

    def retry_after(self, username: str, address: str, now: float) -> float:
        """Seconds to wait before another attempt may be checked; 0 when it may be now."""
        with self._step():
            return self._retry_after(username, address, now)

    def reserve(self, username: str, address: str, now: float) -> float:
        """Counts an attempt as failed before its password is checked, if it may be checked.

        Returns the seconds to wait (nothing counted) or 0: then the password may be checked.
        """
        with self._step():
            wait = self._retry_after(username, address, now)
            if not wait:
                self._failed(username, address, now)
                self._db.execute(
                    "UPDATE failures SET pending = pending + 1 WHERE key IN (?, ?)",
                    (f"user:{username}", f"addr:{address}"),
                )
            return wait

    def failed(self, username: str, address: str, now: float) -> None:
        with self._step():
            self._failed(username, address, now)

    def refused(self, username: str, address: str, now: float) -> None:
        """A reserved attempt judged wrong: it stays counted, and its penalty starts now."""
        with self._step():
            self._db.executemany(
                "UPDATE failures SET last = max(last, ?), pending = max(pending - 1, 0)"
                " WHERE key = ?",
                [(now, f"user:{username}"), (now, f"addr:{address}")],
            )

    def succeeded(self, username: str, address: str | None = None) -> None:
        """Clears the username's count; gives back the address's attempt reserved for it."""
        with self._step():
            self._db.execute("DELETE FROM failures WHERE key = ?", (f"user:{username}",))
            if address is not None:
                self._give_back(f"addr:{address}")

    def release(self, username: str, address: str) -> None:
        """Gives back an attempt reserved but never judged."""
        with self._step():
            self._give_back(f"user:{username}")
            self._give_back(f"addr:{address}")

    def prune(self, now: float) -> None:
        """Drops the records old enough to be forgotten, so guesses at random usernames cannot
        grow the counts without bound."""
        with self._step():
            self._db.execute("DELETE FROM failures WHERE ? - last > ?", (now, FORGET_AFTER))

    def close(self) -> None:
        self._db.close()

    def __len__(self) -> int:
        (count,) = self._db.execute("SELECT count(*) FROM failures").fetchone()
        return int(count)

    @contextmanager
    def _step(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _retry_after(self, username: str, address: str, now: float) -> float:
        return max(
            self._wait(f"user:{username}", USER_FREE_FAILURES, now),
            self._wait(f"addr:{address}", ADDRESS_FREE_FAILURES, now),
        )

    def _failed(self, username: str, address: str, now: float) -> None:
        for key in (f"user:{username}", f"addr:{address}"):
            # A record old enough to be forgotten starts again from nothing.
            self._db.execute(
                "INSERT INTO failures (key, count, last) VALUES (?, 1, ?) ON CONFLICT (key) DO"
                " UPDATE SET count = CASE WHEN ? - last > ? THEN 1 ELSE count + 1 END, last = ?",
                (key, now, now, FORGET_AFTER, now),
            )

    def _give_back(self, key: str) -> None:
        self._db.execute(
            "UPDATE failures SET count = max(count - 1, 0), pending = max(pending - 1, 0)"
            " WHERE key = ?",
            (key,),
        )

    def _wait(self, key: str, free: int, now: float) -> float:
        found = self._db.execute(
            "SELECT count, last, pending FROM failures WHERE key = ?", (key,)
        ).fetchone()
        if found is None:
            return 0.0
        failures, last, pending = found
        if now - last > FORGET_AFTER or failures < free:
            return 0.0
        penalty = min(FIRST_PENALTY * 2.0 ** (failures - free), MAX_PENALTY)
        since = now if pending and now - last < PENDING_HOLD else last
        return float(max(since + penalty - now, 0.0))


def throttled(wait: float) -> ApiError:
    """The answer to an attempt refused for `wait` seconds."""
    seconds = str(math.ceil(wait))
    return ApiError(429, "TooManyRequests", f"too many failed logins; retry in {seconds} s",
                    headers={"Retry-After": seconds})  # fmt: skip
