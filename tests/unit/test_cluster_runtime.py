"""What runs for one cluster, without a cluster: which loops a cluster of each driver gets,
that the state's changes reach them only while they run, and that one failing loop ends them
all (so the shard manager starts the runtime again) while stopping ends them quietly."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from pathlib import Path

import pytest

from corral.operator.controlplane.provisioner import Provisioner
from corral.operator.controlplane.starts import Starts
from corral.operator.downstream.agent import Agent
from corral.operator.drivers.cache import Cache
from corral.operator.drivers.registry import Drivers
from corral.operator.management.cluster_runtime import ClusterRuntime
from corral.operator.management.projects import ProjectKeeper
from corral.operator.state import State
from corral.operator.wakeups import Wake

NOW = datetime.datetime(2026, 2, 3, 4, 5, 6, tzinfo=datetime.UTC)


class FakeLoop:
    def __init__(self, fails: bool = False, deaf: int = 0) -> None:
        self.fails = fails
        self.deaf = deaf  # cancellations it loses, as a library's shielded clean-up can
        self.woken: list[Wake] = []
        self.started = asyncio.Event()
        self.cancelled = False

    def wake(self, reason: Wake) -> None:
        self.woken.append(reason)

    async def run(self) -> None:
        self.started.set()
        if self.fails:
            raise RuntimeError("the loop failed")
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if self.deaf:
                    self.deaf -= 1
                    continue
                self.cancelled = True
                raise


def state() -> State:
    return State(None, lambda: NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("driver", "loops"),
    [
        ("imported", [Agent, ProjectKeeper]),
        (None, [Agent, ProjectKeeper]),
        ("rke2", [Agent, ProjectKeeper, Provisioner]),
        ("k3s", [Agent, ProjectKeeper, Provisioner]),
    ],
)
def test_a_provisioner_runs_only_where_corral_runs_the_control_plane(
    driver: str | None, loops: list[type]
) -> None:
    drivers = Drivers(None, Cache(Path("/nonexistent")))  # type: ignore[arg-type]
    runtime = ClusterRuntime.assemble("c-x", driver, state(), drivers, None, Starts())
    assert [type(loop) for loop in runtime.loops] == loops


def test_a_provisioner_s_change_wakes_the_agent() -> None:
    drivers = Drivers(None, Cache(Path("/nonexistent")))  # type: ignore[arg-type]
    agent, _, provisioner = ClusterRuntime.assemble(
        "c-m-x", "rke2", state(), drivers, None, Starts()
    ).loops
    assert isinstance(agent, Agent) and isinstance(provisioner, Provisioner)
    provisioner.on_change()
    assert Wake.TIMER in agent.wakeups.take()


async def test_a_provisioner_s_change_is_shown_while_the_agent_s_pass_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A restore takes the control plane down: the agent's pass then waits out its probes, and
    the progress (Restoring) must not wait with it."""
    drivers = Drivers(None, Cache(Path("/nonexistent")))  # type: ignore[arg-type]
    agent_state = state()
    agent, _, provisioner = ClusterRuntime.assemble("c-m-x", "rke2", agent_state, drivers,
                                                    None, Starts()).loops  # fmt: skip
    assert isinstance(agent, Agent)
    agent_state.clusters.put({"metadata": {"name": "c-m-x", "resourceVersion": "1"}})
    for informer in agent_state.informers():
        informer.synced.set()
    passing, written = asyncio.Event(), asyncio.Event()

    async def probing(reasons: set[Wake]) -> None:
        passing.set()
        await asyncio.Event().wait()

    async def write(body: dict[str, object]) -> None:
        written.set()

    monkeypatch.setattr(agent, "step", probing)
    monkeypatch.setattr(agent, "_write_status", write)
    running = asyncio.create_task(agent.run())
    try:
        await asyncio.wait_for(passing.wait(), 5)
        assert not written.is_set()
        provisioner.on_change()
        await asyncio.wait_for(written.wait(), 5)
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_changes_reach_the_loops_while_they_run_and_stopping_ends_them() -> None:
    cluster_state = state()
    loops = (FakeLoop(), FakeLoop())
    stop = asyncio.Event()
    running = asyncio.create_task(ClusterRuntime("c-x", cluster_state, loops).run(stop.wait()))
    await asyncio.wait_for(asyncio.gather(*(loop.started.wait() for loop in loops)), 5)
    cluster_state.wake("c-x", Wake.NODE)
    cluster_state.wake("c-other", Wake.NODE)
    assert [loop.woken for loop in loops] == [[Wake.NODE], [Wake.NODE]]
    stop.set()
    await asyncio.wait_for(running, 5)
    assert all(loop.cancelled for loop in loops)
    cluster_state.wake("c-x", Wake.PROJECT)
    assert [loop.woken for loop in loops] == [[Wake.NODE], [Wake.NODE]]


async def test_a_failing_loop_ends_the_whole_runtime() -> None:
    healthy = FakeLoop()
    runtime = ClusterRuntime("c-x", state(), (healthy, FakeLoop(fails=True)))
    never = asyncio.Event()
    with pytest.raises(RuntimeError, match="the loop failed"):
        await asyncio.wait_for(runtime.run(never.wait()), 5)
    assert healthy.cancelled


async def test_a_loop_that_loses_its_cancellation_is_cancelled_again_until_it_ends() -> None:
    deaf = FakeLoop(deaf=2)
    stop = asyncio.Event()
    running = asyncio.create_task(ClusterRuntime("c-x", state(), (deaf,)).run(stop.wait()))
    await asyncio.wait_for(deaf.started.wait(), 5)
    stop.set()
    await asyncio.wait_for(running, 10)
    assert deaf.cancelled and deaf.deaf == 0
