"""What one pass of a pool's reconciler does (provisioning.md 3.2): which machines go, which
hostnames come. Pure: the reconciler observes, this decides, the reconciler acts."""

from __future__ import annotations

import datetime
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corral.core.nodepools import naming
from corral.core.times import parse_time

UNREACHABLE = "node.kubernetes.io/unreachable"
# Rancher's rule: a machine still failing to provision this long after its creation is
# removed, and the pool makes another (provisioning.md 3.2).
FAILED_REPLACE_AFTER = datetime.timedelta(minutes=2)


@dataclass(frozen=True)
class Plan:
    replace: list[str]  # hostnames NotReady too long: removed without a drain
    remove: list[str]  # hostnames beyond the quantity, marked then highest: drained when asked
    add: list[str]  # new hostnames, lowest free numbers first


def not_ready_since(node: Mapping[str, Any]) -> datetime.datetime | None:
    """When the node became unreachable, as Rancher reads it: the `unreachable` taint's time,
    with the node's Ready condition Unknown (the node controller sets both)."""
    status_ready = next(
        (c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    if status_ready is None or status_ready.get("status") != "Unknown":
        return None
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") == UNREACHABLE and taint.get("timeAdded"):
            return parse_time(taint["timeAdded"])
    return None


def plan(
    prefix: str,
    quantity: int,
    hostnames: Sequence[str],
    nodes: Mapping[str, Mapping[str, Any]],
    not_ready_secs: int,
    now: datetime.datetime,
    leaving: Collection[str] = (),
    marked: Collection[str] = (),
) -> Plan:
    """`hostnames` are the pool's machines, `nodes` their downstream nodes by name; those
    `leaving` are on their way out already (their records deleted, or failed too long): they
    count neither as staying nor as free names. Those `marked` (the autoscaler's choice) go
    first when the pool has more than its quantity, as upstream's `delete-machine` does."""
    replace: list[str] = []
    if not_ready_secs > 0:
        limit = datetime.timedelta(seconds=not_ready_secs)
        for name in hostnames:
            since = not_ready_since(nodes[name]) if name in nodes else None
            if since is not None and now - since > limit and name not in leaving:
                replace.append(name)
    staying = [h for h in hostnames if h not in replace and h not in leaving]
    excess = len(staying) - quantity
    chosen = naming.highest([h for h in staying if h in marked], excess)
    rest = [h for h in staying if h not in chosen]
    remove = chosen + naming.highest(rest, excess - len(chosen))
    kept = len(staying) - len(remove)
    # The replaced keep their names taken until they are gone, so a replacement is new.
    add = naming.new_hostnames(prefix, set(hostnames), quantity - kept) if kept < quantity else []
    return Plan(replace, remove, add)


def failed_too_long(
    created: datetime.datetime, conditions: Sequence[Mapping[str, Any]], now: datetime.datetime
) -> bool:
    """Whether a machine record created at `created` with these conditions is to be replaced:
    one of Initialized or Provisioned False more than FAILED_REPLACE_AFTER after creation."""
    failed = any(
        c.get("type") in ("Initialized", "Provisioned") and c.get("status") == "False"
        for c in conditions
    )
    return failed and now - created > FAILED_REPLACE_AFTER
