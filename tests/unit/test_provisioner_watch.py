"""The provisioner's watch of its control plane's workloads: started while the control plane is
on its way, a change it reports wakes the provisioner at once, it stops once the control plane
is Ready, and one that failed is started again at the next pass; a control plane queued for a
start slot waits for it rather than the two-second timer. (The watch itself, against a real
management cluster, is tests/e2e/test_provisioning.py's.)"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

from corral.operator.controlplane.provisioner import Progress, Provisioner
from corral.operator.controlplane.starts import Starts
from corral.operator.state import State
from corral.operator.wakeups import Wake

NOW = datetime.datetime(2026, 2, 3, 4, 5, 6, tzinfo=datetime.UTC)
WAITING = Progress("WaitingForControlPlane", "waiting for etcd")
READY = Progress("Provisioned", ready=True)


class WatchingRuntime:
    """Only the runtime's watch: each call is recorded; the first `failures` calls fail."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.watches = 0
        self.changed: Callable[[], None] | None = None
        self.cancelled = asyncio.Event()

    async def watch(self, cluster: str, changed: Callable[[], None]) -> None:
        self.watches += 1
        self.changed = changed
        if self.watches <= self.failures:
            raise ConnectionError("the watch was cut")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def provisioner(runtime: Any) -> Provisioner:
    return Provisioner("c-m-abc", State(None, lambda: NOW), runtime, Starts(), lambda: None)  # type: ignore[arg-type]


async def test_a_change_of_the_workloads_wakes_the_provisioner_while_it_waits() -> None:
    runtime = WatchingRuntime()
    subject = provisioner(runtime)
    watching = subject._watch(None, WAITING)
    assert watching is not None
    await asyncio.sleep(0)
    assert runtime.changed is not None
    runtime.changed()
    assert Wake.WORKLOAD in subject.wakeups.take()
    # A pass that still waits keeps the watch it has.
    assert subject._watch(watching, WAITING) is watching
    assert runtime.watches == 1
    watching.cancel()


async def test_the_watch_stops_once_the_control_plane_is_ready() -> None:
    runtime = WatchingRuntime()
    subject = provisioner(runtime)
    watching = subject._watch(None, WAITING)
    await asyncio.sleep(0)
    assert subject._watch(watching, READY) is None
    await asyncio.wait_for(runtime.cancelled.wait(), 5)
    assert subject._watch(None, READY) is None
    assert runtime.watches == 1


async def test_a_failed_watch_is_started_again_at_the_next_pass() -> None:
    runtime = WatchingRuntime(failures=1)
    subject = provisioner(runtime)
    failed = subject._watch(None, WAITING)
    assert failed is not None
    await asyncio.wait([failed])
    again = subject._watch(failed, WAITING)
    assert again is not None and again is not failed
    await asyncio.sleep(0)
    assert runtime.watches == 2
    assert not again.done()
    again.cancel()


def test_a_queued_control_plane_waits_for_its_slot_not_the_busy_timer() -> None:
    starts = Starts(limit=1, hold=60.0)
    subject = Provisioner("c-m-abc", State(None, lambda: NOW), WatchingRuntime(), starts,  # type: ignore[arg-type]
                          lambda: None)  # fmt: skip
    starts.admit("c-m-first", lambda: None)
    queued = Progress("WaitingForControlPlane", "waiting to start", queued=True)
    assert 55.0 < subject._interval(queued) <= 60.0
    assert subject._interval(WAITING) == 2.0
    assert subject._interval(READY) == 30.0
