"""Which clusters' runtimes run on this replica (docs/design/operator-sharding.md).

Every replica runs a shard manager, outside kopf's handlers (peering freezes those on all but
one replica). It renews the replica's member Lease, and at each tick (every RENEW_SECONDS, and
at once when a Lease or a Cluster changes) takes the free shards rendezvous hashing gives it,
lets go of those it no longer wins, and runs the runtime (`cluster_runtime.ClusterRuntime`)
of each cluster of the shards it holds, short of those being deleted. A shard's runtimes are
stopped before its Lease is let go, and all of them once the member Lease could not be
renewed for RENEW_DEADLINE: no two replicas run one cluster for longer than a Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from corral.core.clusters import shards
from corral.core.clusters.shards import Step
from corral.core.kube.informer import Obj
from corral.core.kube.shard_leases import ShardLeases
from corral.operator.management.cluster_runtime import ClusterRuntime
from corral.operator.state import State

log = logging.getLogger(__name__)

# A runtime that failed starts again after this long, as kopf's daemons did: a loop failing at
# once must not spin.
RESTART_DELAY = 10.0
# How long past a member Lease's expiry the next tick looks.
EXPIRY_MARGIN = 0.05
# How long a cancelled runtime may take to end before the manager goes on without it (kopf's
# cancellation timeout for the daemons the runtimes were).
STOP_TIMEOUT = 10.0
# How long leaving (stopping the runtimes, letting go of the Leases) may take at shutdown.
LEAVE_TIMEOUT = 10.0

Assemble = Callable[[str, str | None], ClusterRuntime]


class ShardManager:
    def __init__(self, state: State, identity: str, shard_count: int, assemble: Assemble) -> None:
        self._state = state
        self._leases = ShardLeases(state.kube, identity, on_change=self.wake)
        self._assemble = assemble
        self._shard_count = shard_count
        self._running: dict[str, asyncio.Task[None]] = {}
        self._stopping: dict[str, asyncio.Task[None]] = {}  # cancelled, not ended yet
        self._failed: dict[str, float] = {}  # cluster -> when its runtime failed (monotonic)
        self._held: set[int] = set()
        self._renewed: float | None = None  # when the last renewal that worked was sent
        self._woken = asyncio.Event()

    @property
    def identity(self) -> str:
        return self._leases.identity

    def running(self) -> list[str]:
        """The clusters whose runtimes run here."""
        return sorted(self._running)

    def wake(self) -> None:
        self._woken.set()

    async def run(self) -> None:
        """Until cancelled; then the runtimes stop and the Leases are let go."""
        self._state.cluster_listeners.append(self.wake)
        informer = asyncio.create_task(self._leases.leases.run())
        renewing = asyncio.create_task(self._renew())
        try:
            await asyncio.gather(self._state.synced(), self._leases.leases.synced.wait())
            while True:
                try:
                    await self._tick()
                except Exception:  # the next tick starts from the Leases again
                    log.exception("shards: a tick of %s failed", self.identity)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._until_next_tick()):
                        await self._woken.wait()
                self._woken.clear()
        finally:
            self._state.cluster_listeners.remove(self.wake)
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            try:
                async with asyncio.timeout(LEAVE_TIMEOUT):
                    await self._leave()
            except Exception as exc:  # noqa: BLE001 - leaving is best effort: the Leases expire
                log.warning("shards: leaving did not finish, the Leases will expire: %s", exc)
            informer.cancel()
            await asyncio.gather(informer, return_exceptions=True)

    # -- membership -----------------------------------------------------------------------------

    async def _renew(self) -> None:
        while True:
            sent = time.monotonic()
            try:
                # Within a renewal period, so that one hung request cannot outlast the deadline.
                async with asyncio.timeout(shards.RENEW_SECONDS):
                    await self._leases.renew(self._state.clock())
                lapsed = not self._member()
                self._renewed = sent
                if lapsed:  # a member (again): its shards need not wait for the next tick
                    self.wake()
            except Exception as exc:  # noqa: BLE001 - tried again; the deadline stops the clusters
                log.warning("shards: the member Lease of %s was not renewed: %s",
                            self.identity, exc)  # fmt: skip
                self.wake()
            await asyncio.sleep(max(0.0, sent + shards.RENEW_SECONDS - time.monotonic()))

    def _member(self) -> bool:
        """Whether this replica may run clusters: its member Lease was renewed in time."""
        return (
            self._renewed is not None and time.monotonic() - self._renewed < shards.RENEW_DEADLINE
        )

    # -- the tick -------------------------------------------------------------------------------

    async def _tick(self) -> None:
        if not self._member():
            if self._held:
                log.warning("shards: %s lost its membership; stopping its clusters",
                            self.identity)  # fmt: skip
            self._held.clear()
            await self._stop(list(self._running))
            return
        live = shards.live(self._leases.members(), self._state.clock()) | {self.identity}
        steps = shards.decide(self.identity, live, self._leases.holders(), self._shard_count)
        held = {s for s, step in steps.items() if step is Step.RUN}
        taking = [s for s, step in steps.items() if step is Step.TAKE]
        taken = await asyncio.gather(*(self._take(s) for s in taking))
        held |= {s for s, ok in zip(taking, taken, strict=True) if ok}
        for shard in sorted(held - self._held):
            log.info("shards: %s runs shard %d", self.identity, shard)
        self._held = held
        await self._run_clusters()
        lingering = {shards.shard_of(name, self._shard_count) for name in self._stopping}
        releasing = [s for s, step in steps.items() if step is Step.RELEASE and s not in lingering]
        for shard in releasing:
            try:
                await self._leases.release(shard)
                log.info("shards: %s let go of shard %d", self.identity, shard)
            except Exception as exc:  # noqa: BLE001 - the next tick tries again
                log.warning("shards: shard %d could not be let go: %s", shard, exc)
        try:
            await self._leases.forget_gone(self._state.clock())
        except Exception as exc:  # noqa: BLE001 - the next tick tries again
            log.warning("shards: the Lease of a replica gone could not be deleted: %s", exc)

    def _until_next_tick(self) -> float:
        """A renewal period, or less when a member's Lease expires sooner: its shards are
        taken the moment it is gone."""
        expiry = shards.first_expiry(self._leases.members(), self._state.clock())
        if expiry is None:
            return shards.RENEW_SECONDS
        # Just past the expiry, so that the member is gone by then.
        return min(shards.RENEW_SECONDS, max(0.0, expiry.total_seconds()) + EXPIRY_MARGIN)

    async def _take(self, shard: int) -> bool:
        try:
            return await self._leases.take(shard, self._state.clock())
        except Exception as exc:  # noqa: BLE001 - the next tick tries again
            log.warning("shards: shard %d could not be taken: %s", shard, exc)
            return False

    async def _run_clusters(self) -> None:
        """Stops what is no longer wanted here, then starts what is."""
        wanted = {
            name: obj
            for obj in self._state.clusters.all()
            if not obj["metadata"].get("deletionTimestamp")
            and shards.shard_of(name := obj["metadata"]["name"], self._shard_count) in self._held
        }
        for name, task in list(self._running.items()):
            if task.done():
                del self._running[name]
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    log.error("cluster %s: its runtime failed", name, exc_info=failure)
                    self._failed[name] = time.monotonic()
        await self._stop([name for name in self._running if name not in wanted])
        for name, obj in wanted.items():
            if name not in self._running and name not in self._stopping and self._may_start(name):
                self._start(name, obj)

    def _may_start(self, name: str) -> bool:
        failed = self._failed.get(name)
        if failed is None:
            return True
        if time.monotonic() - failed < RESTART_DELAY:
            return False
        del self._failed[name]
        return True

    def _start(self, name: str, obj: Obj) -> None:
        runtime = self._assemble(name, (obj.get("spec") or {}).get("driver"))
        # Until cancelled: the runtime stops when this replica no longer holds its shard.
        forever = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(runtime.run(forever), name=f"cluster {name}")
        task.add_done_callback(lambda _: self.wake())
        self._running[name] = task
        log.info("cluster %s: runs on %s", name, self.identity)

    async def _stop(self, names: list[str]) -> None:
        """Cancels the runtimes and waits for each to end, as kopf stopped its daemons: for at
        most STOP_TIMEOUT, so that one runtime cannot hold up every other shard. One that
        has not ended by then is kept, and its shard is not let go until it has."""
        for name in names:
            self._stopping[name] = self._running.pop(name)
            self._stopping[name].cancel()
        if names:
            await asyncio.wait([self._stopping[n] for n in names], timeout=STOP_TIMEOUT)
        for name, task in list(self._stopping.items()):
            if task.done():
                del self._stopping[name]
                log.info("cluster %s: stopped on %s", name, self.identity)
            elif name in names:
                log.error("cluster %s: its runtime has not ended %.0f s after it was cancelled",
                          name, STOP_TIMEOUT)  # fmt: skip

    async def _leave(self) -> None:
        await self._stop(list(self._running))
        for shard in sorted(self._held):
            await self._leases.release(shard)
        log.info("shards: %s let go of its %d shards and leaves", self.identity, len(self._held))
        self._held.clear()
        await self._leases.leave()
