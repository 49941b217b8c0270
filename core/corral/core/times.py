"""Timestamps as Kubernetes writes them: RFC 3339 in UTC with a `Z`, to the second.

Every timestamp corral writes into an object (a condition's `lastTransitionTime`, a token's
`expiresAt`, a drain's `requestedAt`) goes through `format_time`, so that one object never
holds two spellings of a moment and a reader never has to guess which it got.
"""

from __future__ import annotations

import datetime


def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with a Z, as Kubernetes writes timestamps."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with microseconds, as a Lease's times (MicroTime) are written."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime.datetime:
    """A timestamp as Kubernetes (or `format_time`) writes it."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
