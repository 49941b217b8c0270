"""What the liveness endpoint reports besides kopf's own health."""

from __future__ import annotations

import datetime
from typing import Any

import kopf


@kopf.on.probe(id="now")
def now(**_: Any) -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()
