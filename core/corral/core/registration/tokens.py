"""Cluster registration tokens (docs/design/real-machines.md, "Registration"): what a machine
presents to join a provisioned cluster with the node command.

A token is a `ClusterRegistrationToken` in its cluster's namespace; its value, 48 random
characters, is kept in a Secret in svc-system and never in the CR, which holds the value's
sha256: a presented token is found by that digest, so the lookup compares digests and never
the secret itself. A token never expires unless made with a `ttl` (Rancher's never do); a
machine's own token (`spec.machine`) lasts MACHINE_TOKEN_SECONDS and registers that machine
alone.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import secrets
from collections.abc import Mapping
from typing import Any

from corral.core.api import ids
from corral.core.errors import Invalid
from corral.core.times import format_time, parse_time

DEFAULT_TOKEN = "default-token"
VALUE_LENGTH = 48
# Longer than any real rollout, short enough that a leaked command goes stale within a year.
MAX_TTL_SECONDS = 366 * 24 * 3600
MIN_TTL_SECONDS = 60
MACHINE_TOKEN_SECONDS = 3600
# A presented token is checked before it is looked up: anything else is not one of ours.
_VALUE = re.compile(f"[{ids.ALPHABET}]{{{VALUE_LENGTH}}}", re.ASCII)

ACTIVE = "active"
EXPIRED = "expired"


def machine_token_name(record: str) -> str:
    """The name of a node pool machine's own token: one per machine record."""
    return f"machine-{record}"


def new_value() -> str:
    return "".join(secrets.choice(ids.ALPHABET) for _ in range(VALUE_LENGTH))


def digest(value: str) -> str:
    """The sha256 (hex) a token's CR holds for its value."""
    return hashlib.sha256(value.encode()).hexdigest()


def well_formed(value: str) -> bool:
    return _VALUE.fullmatch(value) is not None


def ttl(value: Any) -> int | None:
    """A create's `ttl` in seconds: None (never expires, also for 0 or absent) or a bounded
    whole number."""
    if value is None or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("ttl must be a whole number of seconds", "ttl")
    if not MIN_TTL_SECONDS <= value <= MAX_TTL_SECONDS:
        raise Invalid(
            f"ttl must be 0 (never expires) or {MIN_TTL_SECONDS} to {MAX_TTL_SECONDS} seconds",
            "ttl",
            code="MinMaxLimitExceeded",
        )
    return value


def expires_at(now: datetime.datetime, seconds: int | None) -> str:
    """When a token made now with `seconds` to live expires; empty for never."""
    return format_time(now + datetime.timedelta(seconds=seconds)) if seconds else ""


def expired(spec: Mapping[str, Any], now: datetime.datetime) -> bool:
    stamp = spec.get("expiresAt") or ""
    return bool(stamp) and parse_time(stamp) <= now


def state(spec: Mapping[str, Any], now: datetime.datetime) -> str:
    return EXPIRED if expired(spec, now) else ACTIVE
