"""The four conditions of a project, from what the operator observed in one pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.conditions import Condition


@dataclass(frozen=True)
class Observed:
    backing_namespace: str
    backing_exists: bool
    creator: str | None  # the creator annotation, if any
    creator_bound: bool  # the creator's owner binding exists
    reachable: bool  # the downstream cluster answered in this pass
    isolate: bool  # the cluster has enableNetworkPolicy
    system: bool  # the System project is never isolated
    namespaces: int
    pending: Mapping[str, int] = field(default_factory=dict)  # per kind, not yet in place


def project_conditions(observed: Observed, current: Sequence[Mapping[str, Any]]) -> list[Condition]:
    creator = _creator(observed, current)
    return [_backing(observed), creator, _roles(observed, creator), _policy(observed)]


def _backing(o: Observed) -> Condition:
    if o.backing_exists:
        return Condition.of(
            ct.BACKING_NAMESPACE_CREATED,
            True,
            ct.REASON_CREATED,
            f"namespace {o.backing_namespace}",
        )
    return Condition.of(
        ct.BACKING_NAMESPACE_CREATED, False, ct.REASON_CREATING, f"creating {o.backing_namespace}"
    )


def _roles(o: Observed, creator: Condition) -> Condition:
    """The creator's binding is the first role to populate: with nothing pending before it
    exists, the roles are not in place yet."""
    if creator.status != "True":
        return Condition.of(
            ct.INITIAL_ROLES_POPULATED,
            False,
            ct.REASON_WAITING_FOR_OWNER,
            "waiting for the creator's project-owner binding",
        )
    if not o.reachable:
        return Condition(
            ct.INITIAL_ROLES_POPULATED,
            "Unknown",
            ct.REASON_CLUSTER_UNAVAILABLE,
            "the cluster is not reachable; its role bindings cannot be checked",
        )
    if pending := o.pending.get("RoleBinding", 0):
        return Condition.of(
            ct.INITIAL_ROLES_POPULATED,
            False,
            ct.REASON_PENDING,
            f"{pending} role binding(s) not yet applied in the project's namespaces",
        )
    return Condition.of(
        ct.INITIAL_ROLES_POPULATED,
        True,
        ct.REASON_POPULATED,
        f"role bindings in place in {o.namespaces} namespace(s)",
    )


def _policy(o: Observed) -> Condition:
    if not o.reachable:
        return Condition(
            ct.DEFAULT_NETWORK_POLICY_CREATED,
            "Unknown",
            ct.REASON_CLUSTER_UNAVAILABLE,
            "the cluster is not reachable; its policies cannot be checked",
        )
    if not o.isolate:
        return Condition.of(
            ct.DEFAULT_NETWORK_POLICY_CREATED,
            True,
            ct.REASON_NETWORK_POLICY_DISABLED,
            "the cluster's enableNetworkPolicy is off: no isolation",
        )
    if o.system:
        return Condition.of(
            ct.DEFAULT_NETWORK_POLICY_CREATED,
            True,
            ct.REASON_SYSTEM_PROJECT,
            "the System project is reachable from every project",
        )
    if pending := o.pending.get("NetworkPolicy", 0):
        return Condition.of(
            ct.DEFAULT_NETWORK_POLICY_CREATED,
            False,
            ct.REASON_PENDING,
            f"{pending} network policy(ies) not yet applied",
        )
    return Condition.of(
        ct.DEFAULT_NETWORK_POLICY_CREATED,
        True,
        ct.REASON_CREATED,
        f"isolated in {o.namespaces} namespace(s)",
    )


def _creator(o: Observed, current: Sequence[Mapping[str, Any]]) -> Condition:
    """Making the creator owner is done once: an owner may later remove that binding, and it
    must not come back."""
    if not o.creator:
        return Condition.of(
            ct.CREATOR_MADE_OWNER,
            True,
            ct.REASON_NO_CREATOR,
            "created without a creator: nobody was made owner",
        )
    if o.creator_bound or conditions.is_true(current, ct.CREATOR_MADE_OWNER):
        return Condition.of(
            ct.CREATOR_MADE_OWNER,
            True,
            ct.REASON_OWNER_BOUND,
            f"{o.creator} was made project-owner",
        )
    return Condition.of(
        ct.CREATOR_MADE_OWNER, False, ct.REASON_BINDING, f"binding {o.creator} as owner"
    )


def all_true(current: Sequence[Mapping[str, Any]]) -> bool:
    return all(conditions.is_true(current, t) for t in ct.PROJECT_TYPES)


def state(project: Mapping[str, Any]) -> tuple[str, str, str]:
    """The project's `/v3` state, transitioning and transitioningMessage: active once every
    condition holds, removing while its namespaces are deleted."""
    if project["metadata"].get("deletionTimestamp"):
        return "removing", "yes", "deleting the project's namespaces"
    conds = (project.get("status") or {}).get("conditions") or []
    if all_true(conds):
        return "active", "no", ""
    waiting = [c for c in conds if c.get("status") != "True"]
    message = "; ".join(f"{c['type']}: {c.get('message', '')}" for c in waiting)
    return "initializing", "yes", message or "waiting for the operator"
