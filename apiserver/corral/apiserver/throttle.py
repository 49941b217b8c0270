"""Slowing down password guessing.

Failures are counted per username and per client address. Past a number of free failures,
further attempts for that username (or from that address) are refused for a doubling period
without checking the password. Addresses get more free failures than usernames, because many
honest users can share one address; a success clears only the username's count, so that one
valid account does not let an address keep guessing others.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_FREE_FAILURES = 5
ADDRESS_FREE_FAILURES = 50
FIRST_PENALTY = 1.0
MAX_PENALTY = 300.0
FORGET_AFTER = 900.0


@dataclass
class _Record:
    failures: int
    last: float


class LoginThrottle:
    def __init__(self) -> None:
        self._records: dict[str, _Record] = {}

    def retry_after(self, username: str, address: str, now: float) -> float:
        """Seconds to wait before another attempt may be checked; 0 when it may be now."""
        return max(
            self._wait(f"user:{username}", USER_FREE_FAILURES, now),
            self._wait(f"addr:{address}", ADDRESS_FREE_FAILURES, now),
        )

    def failed(self, username: str, address: str, now: float) -> None:
        for key in (f"user:{username}", f"addr:{address}"):
            record = self._records.get(key)
            if record is None or now - record.last > FORGET_AFTER:
                record = self._records[key] = _Record(0, now)
            record.failures += 1
            record.last = now

    def succeeded(self, username: str) -> None:
        self._records.pop(f"user:{username}", None)

    def _wait(self, key: str, free: int, now: float) -> float:
        record = self._records.get(key)
        if record is None or now - record.last > FORGET_AFTER or record.failures < free:
            return 0.0
        penalty = min(FIRST_PENALTY * 2.0 ** (record.failures - free), MAX_PENALTY)
        return max(record.last + penalty - now, 0.0)
