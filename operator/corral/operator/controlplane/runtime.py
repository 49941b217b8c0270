"""What runs a hosted control plane: one small contract, so that everything deciding what to
run stays in the pure plan (`corral.core.provisioning.manifests`) and a second runtime would
implement these calls, not the rules. The product has one: `pods.PodRuntime`.

Every call is idempotent and keyed by the cluster's id.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Protocol

from corral.core.clusters.credential import Credential
from corral.core.provisioning import pki as cp
from corral.core.provisioning.manifests import Generations, Plan
from corral.core.provisioning.progress import Seen
from corral.core.provisioning.rotation import Request


class ControlPlaneRuntime(Protocol):
    async def address(self, cluster: str) -> cp.Addresses:
        """Where the control plane will be reached, reserved before anything names it."""

    async def certificates(self, cluster: str, addresses: cp.Addresses) -> Generations:
        """Make whatever certificates and keys are missing; their generations."""

    async def expiries(self, cluster: str) -> dict[str, datetime.datetime]:
        """When the first leaf certificate of each Secret expires (`pki.expiries`), from the
        Secrets as last read: no API call on most passes."""

    async def rotate_certificates(
        self, cluster: str, addresses: cp.Addresses, request: Request
    ) -> bytes:
        """Replace the certificates the rotation names, once per its generation; the cluster
        CA now in force (PEM)."""

    async def etcd_rolled(
        self, cluster: str, pki_generation: int, image: str | None = None
    ) -> bool:
        """etcd runs the certificates of `pki_generation` (and `image`, when given), and is
        Ready."""

    async def ensure(self, plan: Plan, admit: Callable[[], bool] | None = None) -> None:
        """Make what runs match the plan. A control plane not yet started starts only once
        etcd is Ready and `admit` (when given) says it may."""

    async def observe(self, cluster: str) -> Seen:
        """How far the control plane has come, and why it is stuck when it is."""

    async def watch(self, cluster: str, changed: Callable[[], None]) -> None:
        """Call `changed` whenever what `observe` reads of the workloads changes, until
        cancelled or the watch fails."""

    async def bootstrap_credential(self, cluster: str) -> Credential:
        """The control plane's own administrator credential, to install corral's agent with;
        never stored elsewhere and never logged."""

    async def remove(self, cluster: str) -> bool:
        """Remove everything that runs and its data; True once nothing is left."""
