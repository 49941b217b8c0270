"""A node pool's status from its machines (docs/conditions.md, "Node pool"): pure functions
the pool reconciler writes through the status writer and the API reads back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.conditions import Condition

# The pool's conditions: `Provisioned` (it has its quantity of machines, none failing) and
# `Ready` (every one of them is a Ready node).
POOL_TYPES = (ct.PROVISIONED, ct.READY)


@dataclass(frozen=True)
class Counts:
    requested: int  # machines the pool has (Node CRs), failing ones included
    provisioning: int  # of those, not Ready yet and not failing
    ready: int
    failing: int

    def as_status(self) -> dict[str, int]:
        return {"requested": self.requested, "provisioning": self.provisioning,
                "ready": self.ready, "failing": self.failing}  # fmt: skip


def pool_conditions(quantity: int, counts: Counts, last_error: str) -> list[Condition]:
    if counts.failing:
        message = f"{counts.failing} machine(s) failing: {last_error}"
        provisioned = Condition.of(ct.PROVISIONED, False, ct.REASON_MACHINES_FAILING, message)
    elif counts.requested != quantity:
        message = f"{counts.requested} of {quantity} machine(s)"
        provisioned = Condition.of(ct.PROVISIONED, False, ct.REASON_SCALING, message)
    else:
        message = f"{quantity} machine(s)"
        provisioned = Condition.of(ct.PROVISIONED, True, ct.REASON_PROVISIONED, message)
    ready = counts.ready == quantity == counts.requested
    return [
        provisioned,
        Condition.of(ct.READY, ready, ct.REASON_READY if ready else ct.REASON_NOT_READY,
                     f"{counts.ready} of {quantity} node(s) ready"),
    ]  # fmt: skip


def state(pool: Mapping[str, Any]) -> tuple[str, str, str]:
    """The `/v3` state, transitioning and transitioningMessage: `removing`, `provisioning`
    (not yet looked at, or scaling), `error` (a machine failing), `active`."""
    meta, status = pool["metadata"], pool.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "removing", "yes", "removing the pool's machines"
    found = status.get("conditions") or []
    if status.get("observedGeneration") != meta.get("generation") or not found:
        return "provisioning", "yes", "waiting for the operator"
    if conditions.is_true(found, ct.PROVISIONED) and conditions.is_true(found, ct.READY):
        return "active", "no", ""
    provisioned = conditions.find(found, ct.PROVISIONED) or {}
    if provisioned.get("reason") == ct.REASON_MACHINES_FAILING:
        return "error", "error", str(provisioned.get("message", ""))
    waiting = [c for c in found if c.get("status") != "True"]
    return "provisioning", "yes", "; ".join(f"{c['type']}: {c.get('message', '')}" for c in waiting)
