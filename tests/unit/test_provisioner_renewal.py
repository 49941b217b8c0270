"""The provisioner's look at its leaf certificates on a pass: with nothing due it makes no API
call and sets a timer for when the first leaf falls due; nothing is read before corral is in;
a rotation or a version change holds a renewal back until a leaf expires. (Asking for the
renewal and carrying it out, against a real control plane, is tests/e2e/test_provisioning.py's.)"""

from __future__ import annotations

import datetime
from typing import Any

from corral.core.clusters.credential import Credential
from corral.core.kube import cluster_secrets
from corral.core.kube.client import as_dict
from corral.core.provisioning import pki as cp
from corral.core.provisioning import rotation
from corral.operator.controlplane.provisioner import Provisioner
from corral.operator.controlplane.starts import Starts
from corral.operator.state import State
from corral.operator.wakeups import Wake

NOW = datetime.datetime(2026, 2, 3, 4, 5, 6, tzinfo=datetime.UTC)
CLUSTER = "c-m-abc"


class ExpiringRuntime:
    """Only the runtime's expiries, and how often they were read."""

    def __init__(self, days: float) -> None:
        self.found = {cp.SCHEDULER: NOW + datetime.timedelta(days=days)}
        self.reads = 0

    async def expiries(self, cluster: str) -> dict[str, datetime.datetime]:
        self.reads += 1
        return dict(self.found)


def body(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": CLUSTER, "uid": "u-1"},
        "spec": {"driver": "k3s", "kubernetesVersion": "v1.36.3+k3s1", **(spec or {})},
        "status": {"provisioning": {"appliedVersion": "v1.36.3"}},
    }


def provisioner(runtime: ExpiringRuntime, credential: bool = True) -> Provisioner:
    # No management cluster: any API call would fail the test.
    state = State(None, lambda: NOW)  # type: ignore[arg-type]
    if credential:
        secret = cluster_secrets.credential_secret(body(), Credential("https://10.0.0.1:6443"))
        state.connections.credentials.put(as_dict(secret))
    return Provisioner(CLUSTER, state, runtime, Starts(), lambda: None)  # type: ignore[arg-type]


async def test_a_pass_with_nothing_due_calls_nothing_and_wakes_when_a_leaf_falls_due() -> None:
    later = ExpiringRuntime(days=30.5)
    subject = provisioner(later)
    seen = body()
    assert await subject._ask_renewal(seen) is seen
    assert later.reads == 1
    assert Wake.RENEWAL not in subject.wakeups.take()

    # Thirty days left exactly: not due yet, and the timer is for now.
    now = ExpiringRuntime(days=30)
    subject = provisioner(now)
    assert await subject._ask_renewal(seen) is seen
    assert Wake.RENEWAL in subject.wakeups.take()


async def test_nothing_is_read_before_corral_is_in() -> None:
    due = ExpiringRuntime(days=1)
    new = body()
    assert await provisioner(due, credential=False)._ask_renewal(new) is new
    assert due.reads == 0


class Timers:
    """The timers a pass sets, in seconds, by reason."""

    def __init__(self) -> None:
        self.set: dict[Wake, float] = {}

    def after(self, seconds: float, reason: Wake) -> None:
        self.set[reason] = seconds


async def test_a_rotation_or_version_change_holds_a_due_renewal_back_until_a_leaf_expires() -> None:
    due = ExpiringRuntime(days=0.5)
    subject = provisioner(due)
    subject.wakeups = timers = Timers()  # type: ignore[assignment]
    changing = body()
    changing["status"]["provisioning"]["appliedVersion"] = "v1.35.8"
    # Nothing asked (no API call: the State has no management cluster), a timer for the expiry.
    assert await subject._ask_renewal(changing) is changing
    assert due.reads == 1
    assert timers.set == {Wake.RENEWAL: 43200.0}

    owed = body({rotation.ACTION: rotation.Request(1, services=("etcd",)).spec()})
    timers.set.clear()
    assert await subject._ask_renewal(owed) is owed
    assert timers.set == {Wake.RENEWAL: 43200.0}
