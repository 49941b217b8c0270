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
    o = observed
    result = [
        Condition.of("BackingNamespaceCreated", True, "Created", f"namespace {o.backing_namespace}")
        if o.backing_exists
        else Condition.of(
            "BackingNamespaceCreated", False, "Creating", f"creating {o.backing_namespace}"
        ),
        _creator(o, current),
    ]
    if not o.reachable:
        message = "the cluster is not reachable; downstream objects cannot be checked"
        for type in ("DefaultNetworkPolicyCreated", "InitialRolesPopulated"):
            result.append(Condition(type, "Unknown", "ClusterUnavailable", message))
        return result
    rolebindings = o.pending.get("RoleBinding", 0)
    result.append(
        Condition.of("InitialRolesPopulated", False, "Pending",
                     f"{rolebindings} role binding(s) not yet applied in the project's namespaces")
        if rolebindings
        else Condition.of("InitialRolesPopulated", True, "Populated",
                          f"role bindings in place in {o.namespaces} namespace(s)")
    )  # fmt: skip
    policies = o.pending.get("NetworkPolicy", 0)
    if not o.isolate:
        policy = Condition.of("DefaultNetworkPolicyCreated", True, "NetworkPolicyDisabled",
                              "the cluster's enableNetworkPolicy is off: no isolation")  # fmt: skip
    elif o.system:
        policy = Condition.of("DefaultNetworkPolicyCreated", True, "SystemProject",
                              "the System project is reachable from every project")  # fmt: skip
    elif policies:
        policy = Condition.of("DefaultNetworkPolicyCreated", False, "Pending",
                              f"{policies} network policy(ies) not yet applied")  # fmt: skip
    else:
        policy = Condition.of("DefaultNetworkPolicyCreated", True, "Created",
                              f"isolated in {o.namespaces} namespace(s)")  # fmt: skip
    result.append(policy)
    return result


def _creator(o: Observed, current: Sequence[Mapping[str, Any]]) -> Condition:
    """Making the creator owner is done once: an owner may later remove that binding, and it
    must not come back."""
    if not o.creator:
        return Condition.of("CreatorMadeOwner", True, "NoCreator",
                            "created without a creator: nobody was made owner")  # fmt: skip
    if o.creator_bound or conditions.is_true(current, "CreatorMadeOwner"):
        return Condition.of("CreatorMadeOwner", True, "OwnerBound",
                            f"{o.creator} was made project-owner")  # fmt: skip
    return Condition.of("CreatorMadeOwner", False, "Binding", f"binding {o.creator} as owner")


def all_true(current: Sequence[Mapping[str, Any]]) -> bool:
    return all(conditions.is_true(current, t) for t in CONDITION_TYPES)
