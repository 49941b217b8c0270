"""Token lifetimes: clamping at creation, expiry, idle expiry. Times are UTC."""

from __future__ import annotations

import datetime


def minutes_to_ms(minutes: float) -> int:
    return round(minutes * 60_000)


def clamp(requested_ms: int, max_ms: int) -> int:
    """The lifetime a new token gets (spec 3.1).

    No maximum keeps the request; a request for "no expiry" under a maximum gets the maximum;
    otherwise the lower of the two.
    """
    if max_ms == 0:
        return requested_ms
    if requested_ms == 0:
        return max_ms
    return min(requested_ms, max_ms)


def expires_at(created: datetime.datetime, ttl_ms: int) -> datetime.datetime | None:
    """None when the token never expires."""
    if ttl_ms == 0:
        return None
    return created + datetime.timedelta(milliseconds=ttl_ms)


def is_expired(created: datetime.datetime, ttl_ms: int, now: datetime.datetime) -> bool:
    expiry = expires_at(created, ttl_ms)
    return expiry is not None and now >= expiry


def is_idle(
    last_activity: datetime.datetime | None, idle_minutes: float, now: datetime.datetime
) -> bool:
    """Whether a session has been idle longer than allowed; 0 minutes disables the check."""
    if idle_minutes <= 0 or last_activity is None:
        return False
    return now - last_activity > datetime.timedelta(minutes=idle_minutes)


def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with a Z, as Kubernetes writes timestamps."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
