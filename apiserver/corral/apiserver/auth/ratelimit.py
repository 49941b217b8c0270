"""Requests per minute per user, in fixed one-minute windows (per API server replica)."""

from __future__ import annotations

from dataclasses import dataclass

WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_seconds),
        }


class RateLimiter:
    def __init__(self) -> None:
        self._windows: dict[str, tuple[float, int]] = {}  # user -> (window start, count)

    def hit(self, user: str, limit: int, now: float) -> Decision:
        """Count one request; a limit of 0 or less means unlimited."""
        start, count = self._windows.get(user, (now, 0))
        if now - start >= WINDOW_SECONDS:
            start, count = now, 0
        reset = max(1, round(start + WINDOW_SECONDS - now))
        if limit <= 0:
            return Decision(True, 0, 0, reset)
        if count >= limit:
            self._windows[user] = (start, count)
            return Decision(False, limit, 0, reset)
        self._windows[user] = (start, count + 1)
        return Decision(True, limit, limit - count - 1, reset)

    def prune(self, now: float) -> None:
        """Drop finished windows so idle users cost no memory."""
        self._windows = {u: w for u, w in self._windows.items() if now - w[0] < WINDOW_SECONDS}
