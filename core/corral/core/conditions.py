"""metav1.Condition-shaped conditions, recomputed on every pass.

`set_condition` keeps `lastTransitionTime` when the status does not change, so conditions
that are recomputed from observations do not churn; `lastUpdateTime` moves only when the
reason or message does.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.times import format_time


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str = ""

    @classmethod
    def of(cls, type: str, ok: bool, reason: str, message: str = "") -> Condition:
        return cls(type, "True" if ok else "False", reason, message)


def merge(
    current: Sequence[Mapping[str, Any]],
    observed: Sequence[Condition],
    now: datetime.datetime,
    generation: int | None = None,
) -> list[dict[str, Any]]:
    """The new condition list: observed ones replace theirs, others are kept, sorted by type."""
    by_type = {c["type"]: dict(c) for c in current}
    stamp = format_time(now)
    for condition in observed:
        old = by_type.get(condition.type, {})
        entry: dict[str, Any] = {"type": condition.type, "status": condition.status,
                 "reason": condition.reason, "message": condition.message}  # fmt: skip
        entry["lastTransitionTime"] = (
            old["lastTransitionTime"]
            if old.get("status") == condition.status and old.get("lastTransitionTime")
            else stamp
        )
        unchanged = all(old.get(k) == entry[k] for k in ("status", "reason", "message"))
        entry["lastUpdateTime"] = old.get("lastUpdateTime", stamp) if unchanged else stamp
        if generation is not None:
            entry["observedGeneration"] = generation
        by_type[condition.type] = entry
    return [by_type[t] for t in sorted(by_type)]


def find(conditions: Sequence[Mapping[str, Any]], type: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type), None)


def is_true(conditions: Sequence[Mapping[str, Any]], type: str) -> bool:
    found = find(conditions, type)
    return found is not None and found.get("status") == "True"
