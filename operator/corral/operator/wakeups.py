"""Why a cluster's loop makes its next pass: typed reasons, gathered until the pass takes them.

A reason given while a pass runs is kept for the next one, never lost to the pass that is
already past the point of reading it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time


class Wake(enum.Enum):
    TIMER = "timer"  # the resync interval, or something changed below: look at everything again
    PROBE = "probe"  # the probe interval: is the cluster's API server there and ready
    CREDENTIAL = "credential"  # the cluster's credential came, changed or went
    SPEC = "spec"  # the Cluster's spec (enableNetworkPolicy, …)
    NODE = "node"  # a downstream node, or a Node CR's spec
    NAMESPACE = "namespace"  # a downstream namespace
    PROJECT = "project"  # a Project, a role binding, or a backing namespace
    RETRY = "retry"  # the last pass left work pending or failed
    POOL = "pool"  # a NodePool's spec, or a pool's machine still on its way
    CERTIFICATE = "certificate"  # a kubelet's certificate request in a provisioned cluster
    OWNED = "owned"  # an object the project sync keeps downstream (a quota, a binding, …)
    POD = "pod"  # a downstream pod, as far as the node totals and the autoscaler read it
    AUTOSCALE = "autoscale"  # pools with bounds: the autoscaler's rules also wait on time
    WORKLOAD = "workload"  # a hosted control plane's StatefulSet or Deployment changed
    RENEWAL = "renewal"  # a hosted control plane's first leaf certificate falls due for renewal


class Wakeups:
    def __init__(self) -> None:
        self._reasons: set[Wake] = set()
        # Set by every reason and timer given, so a waiter sees a timer earlier than the one
        # it is waiting for.
        self._event = asyncio.Event()
        self._timers: dict[Wake, float] = {}

    def add(self, reason: Wake) -> None:
        self._reasons.add(reason)
        self._event.set()

    def after(self, seconds: float, reason: Wake) -> None:
        """`reason` in `seconds` at the latest; an earlier request for it stands."""
        due = time.monotonic() + seconds
        self._timers[reason] = min(self._timers.get(reason, due), due)
        self._event.set()

    def take(self) -> set[Wake]:
        """The reasons gathered so far; the next pass starts with none."""
        self._due()
        taken, self._reasons = self._reasons, set()
        self._event.clear()
        return taken

    async def wait(self) -> None:
        """Until a reason is given or falls due."""
        while True:
            self._due()
            if self._reasons:
                return
            self._event.clear()
            due = min(self._timers.values(), default=None)
            timeout = None if due is None else max(due - time.monotonic(), 0)
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the result of an
            # event set in the same moment the waiter is cancelled, and the cancellation is lost.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._event.wait()

    def _due(self) -> None:
        now = time.monotonic()
        for reason, due in list(self._timers.items()):
            if due <= now:
                del self._timers[reason]
                self._reasons.add(reason)
