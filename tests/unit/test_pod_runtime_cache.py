"""What a pass at rest costs the management cluster: the pod runtime applies an object again only
when it changed or RESYNC has passed, and reads the certificate Secrets again only after it
wrote them. The client records the requests (the runtime's behaviour against a real control
plane is tests/e2e/test_provisioning.py's). The control-plane Deployment waits for etcd's
readiness, and a start slot, before it is first made."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from lightkube import ApiError

from corral.core.provisioning import catalog, manifests
from corral.core.provisioning import pki as cp
from corral.operator.controlplane import pods

CLUSTER = "c-m-abc"
ADDRESSES = cp.Addresses(namespace=CLUSTER, apiserver_ip="10.0.0.40", etcd_ip="10.0.0.41")


class Missing(ApiError):
    def __init__(self) -> None:
        Exception.__init__(self, "not found")
        self.status = type("Status", (), {"code": 404, "message": "not found"})()


class RecordingKube:
    """A management cluster of plain dicts that counts what is asked of it."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Any] = {}
        self.applied: list[str] = []
        self.read: list[str] = []

    async def apply(self, obj: Any, field_manager: str, force: bool) -> Any:
        self.applied.append(obj.metadata.name)
        if obj.kind == "Service":
            obj.spec.clusterIP = "10.0.0.40"
        self.objects[(obj.kind, obj.metadata.name)] = obj
        return obj

    async def get(self, kind: Any, name: str, namespace: str | None = None) -> Any:
        self.read.append(name)
        found = self.objects.get((kind.__name__, name))
        if found is None:
            raise Missing()
        return found

    async def list(self, *_: Any, **__: Any) -> AsyncIterator[Any]:
        for _ in ():
            yield _


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def runtime() -> tuple[pods.PodRuntime, RecordingKube, Clock]:
    kube, clock = RecordingKube(), Clock()
    return pods.PodRuntime(kube, clock=clock), kube, clock  # type: ignore[arg-type]


def service() -> dict[str, Any]:
    return manifests.services(CLUSTER)[0]


def test_an_object_is_applied_again_only_when_it_changed_or_after_resync() -> None:
    run, kube, clock = runtime()
    asyncio.run(run._apply(service()))
    asyncio.run(run._apply(service()))
    assert len(kube.applied) == 1
    changed = service()
    changed["metadata"]["labels"] = {**changed["metadata"]["labels"], "x": "y"}
    asyncio.run(run._apply(changed))
    assert len(kube.applied) == 2
    clock.now += pods.RESYNC
    asyncio.run(run._apply(changed))
    assert len(kube.applied) == 3


def test_the_certificates_are_read_once_and_again_after_a_rotation_or_resync() -> None:
    run, kube, clock = runtime()
    asyncio.run(run.certificates(CLUSTER, ADDRESSES))
    issued = len(kube.applied)
    assert issued == len(pods.SECRETS)
    kube.read.clear()
    first = asyncio.run(run.certificates(CLUSTER, ADDRESSES))
    reads = len(kube.read)
    assert reads == len(pods.SECRETS)  # once after issuing them
    assert asyncio.run(run.certificates(CLUSTER, ADDRESSES)) == first
    assert len(kube.read) == reads
    clock.now += pods.RESYNC
    asyncio.run(run.certificates(CLUSTER, ADDRESSES))
    assert len(kube.read) == 2 * reads
    assert len(kube.applied) == issued


def test_a_workload_found_gone_is_applied_again_at_once() -> None:
    run, kube, _ = runtime()
    asyncio.run(run._apply(service()))
    asyncio.run(run.observe(CLUSTER))  # neither the StatefulSet nor the Deployment is there
    asyncio.run(run._apply(service()))
    assert len(kube.applied) == 2


def plan() -> manifests.Plan:
    release = catalog.Release(
        "v1.36.3", {name: catalog.Component("image:1", ()) for name in catalog.REQUIRED}
    )
    return manifests.Plan(CLUSTER, "k3s", release, ADDRESSES, pki_generation=1)


def test_the_control_plane_is_first_applied_once_etcd_is_ready_and_it_may_start() -> None:
    run, kube, _ = runtime()
    asyncio.run(run.ensure(plan()))
    assert manifests.CONTROL_PLANE not in kube.applied
    asyncio.run(run.ensure(plan()))
    assert manifests.CONTROL_PLANE not in kube.applied
    etcd = manifests.etcd(plan())
    kube.objects[("StatefulSet", "etcd")] = etcd | {"status": {"replicas": 1, "readyReplicas": 1}}
    asked: list[bool] = []
    asyncio.run(run.ensure(plan(), lambda: asked.append(False) or False))
    assert asked == [False] and manifests.CONTROL_PLANE not in kube.applied
    asyncio.run(run.ensure(plan(), lambda: True))
    assert manifests.CONTROL_PLANE in kube.applied
    # Once made, no start slot is asked for again.
    asyncio.run(run.ensure(plan(), lambda: asked.append(False) or False))
    assert asked == [False]
    # Made once, it is kept as the plan says whatever etcd does (a restore scales etcd to 0).
    kube.objects[("StatefulSet", "etcd")] = etcd | {"status": {"replicas": 0}}
    kube.applied.clear()
    changed = dataclasses.replace(plan(), pki_generation=2)
    asyncio.run(run.ensure(changed))
    assert manifests.CONTROL_PLANE in kube.applied
