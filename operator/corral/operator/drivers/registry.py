"""The one way to reach the driver of a machine: the builtin `kwok` driver through corral's
client for the machine's cluster, any other through its executable in the driver cache,
connected to the template's config and cloud credential.

Whether a driver may make new machines (active and ready) is asked separately: removing or
observing the machines a driver made needs only its verified executable, so deactivating a
driver never strands its machines.

What a driver's machine will be as a node before it is made (`node_shape`) is asked here too:
the autoscaler weighs a pool's next machine without knowing which driver makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient

from corral.core.api import names
from corral.core.drivers import status as driver_status
from corral.core.drivers.templates import MachineInputs
from corral.core.errors import Invalid, Unavailable
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.operator.drivers import kwok
from corral.operator.drivers.cache import Cache
from corral.operator.drivers.contract import NodeDriver
from corral.operator.drivers.executable import ExecutableDriver


@dataclass(frozen=True)
class NodeShape:
    """What a machine brings to its cluster as a node, before it is made."""

    capacity: Mapping[str, str]
    labels: Mapping[str, str]


def node_shape(driver: str | None, config: Mapping[str, object]) -> NodeShape | None:
    """The node a machine of `driver` made from a template's `config` would be, where corral
    knows it without making one: the builtin kwok driver's. None for an executable driver:
    its pools say their machines' capacity in annotations (as upstream's autoscaler asks)."""
    if driver == names.KWOK_DRIVER:
        return NodeShape(kwok.capacity(config), kwok.LABELS)
    return None


@dataclass(frozen=True)
class Drivers:
    kube: AsyncClient  # the management cluster's, where NodeDriver objects are
    cache: Cache

    async def usable(self, driver: str) -> bool:
        """Whether new machines may be made with `driver`: it exists, is active and ready."""
        found = await self._get(driver)
        return found is not None and driver_status.usable(found)

    async def connect(
        self, inputs: MachineInputs, cluster: str, client: AsyncClient | None
    ) -> NodeDriver:
        """The driver of a template's machines, connected to its inputs. `client` reaches the
        machines' cluster (the kwok driver's machines are its nodes); None when it cannot be
        reached. Invalid when the driver is gone, Unavailable when it cannot be run now."""
        if inputs.driver == names.KWOK_DRIVER:
            if client is None:
                raise Unavailable(f"cluster {cluster} cannot be reached for its kwok machines")
            return kwok.KwokDriver(client, cluster)
        found = await self._get(inputs.driver)
        if found is None:
            raise Invalid(f"node driver {inputs.driver} is gone", field="driver")
        digest = str((found.get("status") or {}).get("digest") or "")
        path = await self.cache.verified(digest) if digest else None
        if path is None:
            raise Unavailable(
                f"node driver {inputs.driver}: its executable is not in the driver cache "
                "(an active driver is downloaded again)"
            )
        return ExecutableDriver(inputs.driver, path, inputs.config, inputs.credential)

    async def _get(self, driver: str) -> dict[str, Any] | None:
        try:
            return as_dict(await self.kube.get(kinds.NodeDriver, driver))
        except KubeApiError as exc:
            if exc.status.code == 404:
                return None
            raise
