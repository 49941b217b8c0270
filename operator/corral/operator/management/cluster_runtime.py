"""What runs for one downstream cluster while its Cluster exists: its agent
(`corral.operator.downstream.agent`), its project keeper (`projects.ProjectKeeper`) and, for an
rke2 or k3s cluster, its provisioner (`corral.operator.controlplane.provisioner`).

They run side by side, each woken by the changes the operator's state routes to the cluster,
and stop together: the shard manager (`shard_manager.py`) runs one runtime per Cluster, on the
replica holding the Cluster's shard, and a loop that fails ends the whole runtime, which the
manager starts again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from corral.core.api import drivers as cluster_drivers
from corral.operator.config import HostedGrant
from corral.operator.controlplane.pods import PodRuntime
from corral.operator.controlplane.provisioner import Provisioner
from corral.operator.controlplane.starts import Starts
from corral.operator.downstream.agent import Agent
from corral.operator.drivers.registry import Drivers
from corral.operator.management.projects import ProjectKeeper
from corral.operator.state import State
from corral.operator.wakeups import Wake

log = logging.getLogger(__name__)

# How long a cancelled loop has to end before it is cancelled again.
CANCEL_AGAIN = 1.0


class Loop(Protocol):
    """What runs for a cluster: passes until cancelled, each woken by typed reasons."""

    def wake(self, reason: Wake) -> None: ...

    async def run(self) -> None: ...


@dataclass(frozen=True)
class ClusterRuntime:
    cluster: str
    state: State
    loops: tuple[Loop, ...]

    @classmethod
    def assemble(
        cls,
        cluster: str,
        driver: str | None,
        state: State,
        drivers: Drivers,
        grant: HostedGrant | None,
        starts: Starts,
    ) -> ClusterRuntime:
        """The loops of a cluster of `driver`: a provisioner only where corral runs the
        control plane, waking the agent whenever it changed something the agent observes;
        `starts` is shared by the replica's provisioners."""
        agent = Agent(cluster, state, drivers)
        loops: list[Loop] = [agent, ProjectKeeper(cluster, state)]
        if driver in cluster_drivers.HOSTED:
            runtime = PodRuntime(state.kube, grant)
            loops.append(Provisioner(cluster, state, runtime, starts, on_change=agent.progressed))
        return cls(cluster, state, tuple(loops))

    async def run(self, stopped: Awaitable[object]) -> None:
        """The loops, each woken by the state's changes to the cluster, until `stopped`."""
        with self.state.attached(self.cluster, *(loop.wake for loop in self.loops)):
            await _run_until_stopped([loop.run() for loop in self.loops], stopped)


async def _run_until_stopped(
    loops: list[Coroutine[Any, Any, None]], stopped: Awaitable[object]
) -> None:
    """Run the loops until `stopped`; a loop that fails fails the whole, so that its caller
    (the shard manager) starts it again."""

    async def until_stopped() -> None:
        await stopped

    tasks = [asyncio.create_task(loop) for loop in loops]
    stop = asyncio.create_task(until_stopped())
    try:
        done, _ = await asyncio.wait([*tasks, stop], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stop:
                task.result()
    finally:
        await _cancel([*tasks, stop])


async def _cancel(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel the tasks until each has ended. A cancellation can be lost on its way through a
    library (a clean-up shielded from it, a timeout racing it), and a loop that lost one would
    run on beside the next owner of its cluster: it is cancelled again until it ends."""
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=CANCEL_AGAIN)
        for task in pending:
            log.warning("a loop of a cluster's runtime did not end when cancelled: %s", task)
