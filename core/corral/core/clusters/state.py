"""A cluster's Rancher-style state, as both its `/v3` resource and its `/v1` view show it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core import conditions
from corral.core.api import condition_types as ct


def state(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """State, transitioning (`yes`, `no` or `error`) and its message, from the conditions."""
    status = obj.get("status") or {}
    conds = status.get("conditions") or []
    if obj["metadata"].get("deletionTimestamp"):
        return "removing", "yes", "waiting for the operator to clean up"
    if conditions.is_true(conds, ct.READY):
        return "active", "no", ""
    ready = conditions.find(conds, ct.READY)
    if conditions.is_true(conds, ct.PENDING) or ready is None:
        return "pending", "yes", (ready or {}).get("message", "")
    return "unavailable", "error", ready.get("message", "")
