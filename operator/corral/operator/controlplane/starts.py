"""How many new hosted control planes an operator replica starts at once (docs/provisioning.md,
"Ten at once").

A control plane's start is CPU-bound (the apiserver's post-start hooks against a new etcd, then
the controller manager's informers), and starts that share a node's cores all finish late:
each apiserver gets a sliver, fails its probes, and its loopback calls time out and are made
again. A new cluster's control plane (its apiserver and controllers: etcd starts at once, so
it is Ready when its turn comes) therefore waits for one of `limit` slots
(CORRAL_HOSTED_CONTROL_PLANE_STARTS), in the order the clusters asked, and gives it back once
its control plane is Ready. A start that takes longer
than HOLD (a pod that cannot be scheduled, a container crash-looping) gives its slot up then
and goes on without one, so no cluster can hold the others back for good. A queued cluster
asks again when the queue moves (every one waiting is woken, and shows its new place) or when
the oldest start's hold runs out, not on the provisioner's two-second timer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from corral.operator.config import DEFAULT_HOSTED_STARTS

HOLD = 60.0


class Starts:
    def __init__(
        self,
        limit: int = DEFAULT_HOSTED_STARTS,
        hold: float = HOLD,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.hold = hold
        self.clock = clock
        self._starting: dict[str, float] = {}  # cluster: when its slot was given
        # In the order they first asked; each with how to wake its provisioner.
        self._waiting: dict[str, Callable[[], None]] = {}
        # Those that held their slot past `hold`: they go on without one.
        self._overdue: set[str] = set()

    def admit(self, cluster: str, wake: Callable[[], None]) -> int:
        """0 when `cluster`'s control plane may start (now or already); otherwise its place
        in the queue (1: next). `wake` is called whenever the queue moves (a slot came free,
        one ahead started or left), so that the cluster asks again and shows its new place."""
        self._expire()
        if cluster in self._starting or cluster in self._overdue:
            return 0
        self._waiting.setdefault(cluster, wake)
        ahead = list(self._waiting).index(cluster)
        if len(self._starting) + ahead >= self.limit:
            return ahead + 1
        del self._waiting[cluster]
        self._starting[cluster] = self.clock()
        self._moved()
        return 0

    def done(self, cluster: str) -> None:
        """`cluster` no longer starts: Ready, deleted, or no longer this replica's."""
        self._overdue.discard(cluster)
        waited = self._waiting.pop(cluster, None) is not None
        if self._starting.pop(cluster, None) is not None or waited:
            self._moved()

    def until_free(self) -> float:
        """Seconds until a slot comes free with no `done`: the oldest start's hold running
        out (`hold` while none holds a slot). A queued cluster waits this long, or for its
        wake, rather than asking again and again."""
        if not self._starting:
            return self.hold
        oldest = min(self._starting.values())
        return max(self.hold - (self.clock() - oldest), 0.0)

    def _expire(self) -> None:
        now = self.clock()
        late = [c for c, since in self._starting.items() if now - since >= self.hold]
        for cluster in late:
            del self._starting[cluster]
            self._overdue.add(cluster)
        if late:
            self._moved()

    def _moved(self) -> None:
        for wake in list(self._waiting.values()):
            wake()
