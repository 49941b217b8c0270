"""The four conditions of a project, from what the operator observed in one pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.core import conditions
from corral.core.conditions import Condition

CONDITION_TYPES = (
    "BackingNamespaceCreated",
    "CreatorMadeOwner",
    "DefaultNetworkPolicyCreated",
    "InitialRolesPopulated",
)


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
            "BackingNamespaceCreated", True, "Created", f"namespace {o.backing_namespace}"
        )
    return Condition.of(
        "BackingNamespaceCreated", False, "Creating", f"creating {o.backing_namespace}"
    )


def _roles(o: Observed, creator: Condition) -> Condition:
    """The creator's binding is the first role to populate: with nothing pending before it
    exists, the roles are not in place yet."""
    if creator.status != "True":
        return Condition.of(
            "InitialRolesPopulated",
            False,
            "WaitingForOwner",
            "waiting for the creator's project-owner binding",
        )
    if not o.reachable:
        return Condition(
            "InitialRolesPopulated",
            "Unknown",
            "ClusterUnavailable",
            "the cluster is not reachable; its role bindings cannot be checked",
        )
    if pending := o.pending.get("RoleBinding", 0):
        return Condition.of(
            "InitialRolesPopulated",
            False,
            "Pending",
            f"{pending} role binding(s) not yet applied in the project's namespaces",
        )
    return Condition.of(
        "InitialRolesPopulated",
        True,
        "Populated",
        f"role bindings in place in {o.namespaces} namespace(s)",
    )


def _policy(o: Observed) -> Condition:
    if not o.reachable:
        return Condition(
            "DefaultNetworkPolicyCreated",
            "Unknown",
            "ClusterUnavailable",
            "the cluster is not reachable; its policies cannot be checked",
        )
    if not o.isolate:
        return Condition.of(
            "DefaultNetworkPolicyCreated",
            True,
            "NetworkPolicyDisabled",
            "the cluster's enableNetworkPolicy is off: no isolation",
        )
    if o.system:
        return Condition.of(
            "DefaultNetworkPolicyCreated",
            True,
            "SystemProject",
            "the System project is reachable from every project",
        )
    if pending := o.pending.get("NetworkPolicy", 0):
        return Condition.of(
            "DefaultNetworkPolicyCreated",
            False,
            "Pending",
            f"{pending} network policy(ies) not yet applied",
        )
    return Condition.of(
        "DefaultNetworkPolicyCreated", True, "Created", f"isolated in {o.namespaces} namespace(s)"
    )


def _creator(o: Observed, current: Sequence[Mapping[str, Any]]) -> Condition:
    """Making the creator owner is done once: an owner may later remove that binding, and it
    must not come back."""
    if not o.creator:
        return Condition.of(
            "CreatorMadeOwner",
            True,
            "NoCreator",
            "created without a creator: nobody was made owner",
        )
    if o.creator_bound or conditions.is_true(current, "CreatorMadeOwner"):
        return Condition.of(
            "CreatorMadeOwner", True, "OwnerBound", f"{o.creator} was made project-owner"
        )
    return Condition.of("CreatorMadeOwner", False, "Binding", f"binding {o.creator} as owner")


def all_true(current: Sequence[Mapping[str, Any]]) -> bool:
    return all(conditions.is_true(current, t) for t in CONDITION_TYPES)
