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
penalty runs out while an attempt is still being checked (`pending`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from corral.apiserver.http.errors import ApiError

USER_FREE_FAILURES = 5
ADDRESS_FREE_FAILURES = 50
FIRST_PENALTY = 1.0
MAX_PENALTY = 300.0
FORGET_AFTER = 900.0


@dataclass
class _Record:
    failures: int
    last: float
    pending: int = 0


class LoginThrottle:
    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}

    def retry_after(self, username: str, address: str, now: float) -> float:
        """Seconds to wait before another attempt may be checked; 0 when it may be now."""
        return max(
            self._wait(f"user:{username}", USER_FREE_FAILURES, now),
            self._wait(f"addr:{address}", ADDRESS_FREE_FAILURES, now),
        )

    def reserve(self, username: str, address: str, now: float) -> float:
        """Counts an attempt as failed before its password is checked, if it may be checked.

        Returns the seconds to wait (nothing counted) or 0: then the password may be checked.
        Must not await between the two: the check and the count are one step.
        """
        wait = self.retry_after(username, address, now)
        if not wait:
            self.failed(username, address, now)
            for key in (f"user:{username}", f"addr:{address}"):
                self._records[key].pending += 1
        return wait

    def failed(self, username: str, address: str, now: float) -> None:
        for key in (f"user:{username}", f"addr:{address}"):
            record = self._records.get(key)
            if record is None or now - record.last > FORGET_AFTER:
                record = self._records[key] = _Record(0, now)
            record.failures += 1
            record.last = now

    def refused(self, username: str, address: str, now: float) -> None:
        """A reserved attempt judged wrong: it stays counted, and its penalty starts now."""
        for key in (f"user:{username}", f"addr:{address}"):
            record = self._records.get(key)
            if record is not None:
                record.last = max(record.last, now)
                record.pending = max(record.pending - 1, 0)

    def succeeded(self, username: str, address: str | None = None) -> None:
        """Clears the username's count; gives back the address's attempt reserved for it."""
        self._records.pop(f"user:{username}", None)
        if address is not None:
            self._give_back(f"addr:{address}")

    def release(self, username: str, address: str) -> None:
        """Gives back an attempt reserved but never judged."""
        self._give_back(f"user:{username}")
        self._give_back(f"addr:{address}")

    def prune(self, now: float) -> None:
        """Drops the records old enough to be forgotten, so guesses at random usernames cannot
        grow memory without bound."""
        for key in [k for k, r in self._records.items() if now - r.last > FORGET_AFTER]:
            del self._records[key]

    def __len__(self) -> int:
        return len(self._records)

    def _give_back(self, key: str) -> None:
        record = self._records.get(key)
        if record is not None:
            record.failures = max(record.failures - 1, 0)
            record.pending = max(record.pending - 1, 0)

    def _wait(self, key: str, free: int, now: float) -> float:
        record = self._records.get(key)
        if record is None or now - record.last > FORGET_AFTER or record.failures < free:
            return 0.0
        penalty = min(FIRST_PENALTY * 2.0 ** (record.failures - free), MAX_PENALTY)
        since = now if record.pending else record.last
        return max(since + penalty - now, 0.0)


def throttled(wait: float) -> ApiError:
    """The answer to an attempt refused for `wait` seconds."""
    seconds = str(math.ceil(wait))
    return ApiError(429, "TooManyRequests", f"too many failed logins; retry in {seconds} s",
                    headers={"Retry-After": seconds})  # fmt: skip
