"""Token lifetimes: clamping at creation, expiry, idle expiry. Times are UTC."""

from __future__ import annotations

import datetime

from corral.core.errors import Invalid

# The longest lifetime a token may be given: 100 Julian years, as the longest the settings
# allow (settings.MAX_MINUTES). Far beyond any use; creation plus this fits a datetime.
MAX_TTL_MS = 100 * 525_960 * 60_000

# What an expiry beyond what a datetime can hold is reported as: in practice, never.
END_OF_TIME = datetime.datetime.max.replace(tzinfo=datetime.UTC)

_MILLISECOND = datetime.timedelta(milliseconds=1)


class TtlError(Invalid):
    def __init__(self, message: str) -> None:
        super().__init__(message, "ttl")


def minutes_to_ms(minutes: float) -> int:
    return round(minutes * 60_000)


def requested(value: object) -> int:
    """A lifetime from a JSON body, in milliseconds: a whole number from 0 to MAX_TTL_MS.

    JSON has one number type and parsers may give `1e15` or `3600000.0` as floats: a float
    with no fraction is the whole number it writes. Booleans, strings, fractions, NaN and the
    infinities are not lifetimes.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TtlError("ttl must be a whole number of milliseconds")
    if isinstance(value, float) and not value.is_integer():
        raise TtlError("ttl must be a whole number of milliseconds")
    if not 0 <= value <= MAX_TTL_MS:
        raise TtlError(f"ttl must be from 0 to {MAX_TTL_MS} milliseconds (100 years)")
    return int(value)


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
    """None when the token never expires.

    Saturates rather than overflows: a stored lifetime too long for a datetime (written before
    lifetimes were bounded) expires at END_OF_TIME, a negative one at creation.
    """
    if ttl_ms == 0:
        return None
    if ttl_ms >= (END_OF_TIME - created) // _MILLISECOND:
        return END_OF_TIME
    return created + datetime.timedelta(milliseconds=max(ttl_ms, 0))


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


# How often at most an API server writes down a token's last use: a write per request would
# turn every read into an etcd write.
ACTIVITY_WRITE_INTERVAL = datetime.timedelta(minutes=1)


def activity_write_interval(idle_minutes: float) -> datetime.timedelta:
    """The longest a use stays unwritten: a minute, or under half the idle timeout, so that a
    replica that did not serve a session never judges it idle while another keeps it busy."""
    if idle_minutes <= 0:
        return ACTIVITY_WRITE_INTERVAL
    return min(ACTIVITY_WRITE_INTERVAL, datetime.timedelta(minutes=idle_minutes) / 2)


def idle_beyond_doubt(
    written: datetime.datetime | None, idle_minutes: float, now: datetime.datetime
) -> bool:
    """Whether a session whose last use was written down at `written` is idle even if a use
    since then has not been written yet: idle longer than the timeout plus the longest a use
    stays unwritten (and a second for the writer's tick). What the purge deletes by."""
    if idle_minutes <= 0 or written is None:
        return False
    grace = activity_write_interval(idle_minutes) + datetime.timedelta(seconds=1)
    return now - written > datetime.timedelta(minutes=idle_minutes) + grace
