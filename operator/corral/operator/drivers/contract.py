"""The contract every node driver keeps.

A driver makes, observes and destroys machines in one place (a cloud, a hypervisor, kwok for
tests); it knows nothing of Kubernetes objects. Its caller, a node pool reconciler, owns the Node
CRs: it asks `create` for each machine a pool is missing, `observe` on every pass to fill in the
machine's conditions, and `delete` when a pool scales down or a machine failed.

Every call is idempotent and keyed by the machine's name (the Node CR's name, which the caller
chooses): `create` of a machine that exists returns it, `delete` of one that is gone returns.
A call that cannot reach the driver's backend raises `corral.core.errors.Unavailable`; one the
backend refuses for the input (a bad template, no quota) raises `corral.core.errors.Invalid`.

A driver is connected to one node template's config and cloud credential (Crossplane's
`Connect`): `observe` and `delete` reach the backend with them, `create` with the request's.
`executable.ExecutableDriver` keeps this contract for a downloaded executable
(docs/drivers.md); the builtin drivers keep it in process.

The caller records a creation before it asks for it, so that an operator stopped at any point
neither leaks nor duplicates a machine: the Node CR exists first (its name is the machine's
key), `names.ANNOTATION_CREATE_PENDING` is written on it before `create` is called and
`names.ANNOTATION_CREATE_SUCCEEDED` once it answered; a record left pending is settled by
`observe` first (`corral.core.drivers.machines.next_call`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class Phase(enum.Enum):
    """Where a machine is in its life, as its driver sees it."""

    PROVISIONING = "Provisioning"  # asked for, not running yet
    RUNNING = "Running"  # up; its node joins the cluster with `JoinConfig`
    FAILED = "Failed"  # will not come up; the caller deletes it and asks again
    DELETING = "Deleting"  # being destroyed


@dataclass(frozen=True)
class JoinConfig:
    """What a new machine needs to join its cluster as a node."""

    server: str  # the cluster's API server URL
    ca_cert: bytes  # the CA the machine trusts for `server`
    token: str  # a bootstrap token; a secret, never logged
    labels: Mapping[str, str] = field(default_factory=dict)  # the pool's node labels
    taints: tuple[Mapping[str, str], ...] = ()  # the pool's node taints
    # A real machine joins by running this one shell line as root (the node command of a
    # registration token of its own, single-use, valid for an hour; docs/drivers.md); empty
    # when the operator does not know corral's URL. A secret, never logged.
    command: str = ""


@dataclass(frozen=True)
class MachineRequest:
    name: str  # the Node CR's name: the key of every call about this machine
    cluster: str  # the cluster id
    hostname: str  # the node's name once it joins (the pool's prefix and number)
    template: Mapping[str, object]  # the node template's `<driver>Config`, as stored
    join: JoinConfig
    # The cloud credential's secret fields, when the template names one; never logged.
    credential: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Machine:
    name: str
    phase: Phase
    message: str = ""  # why it is failed or not running yet, for the Node CR's conditions
    provider_id: str = ""  # what the node reports as `spec.providerID` once it joins
    addresses: tuple[str, ...] = ()


class NodeDriver(Protocol):
    """One kind of machine. `name` is the driver's name as node templates and NodeDriver
    objects give it (`amazonec2`, `kwok`, …)."""

    @property
    def name(self) -> str: ...

    async def observe(self, name: str) -> Machine | None:
        """The machine as it is now; None when there is no such machine."""
        ...

    async def create(self, request: MachineRequest) -> Machine:
        """Ask for the machine and return at once, usually still `PROVISIONING`; `observe`
        follows it from there."""
        ...

    async def delete(self, name: str) -> None:
        """Destroy the machine; returns once the backend has accepted that, not when it is
        gone (`observe` says so)."""
        ...
