"""The per-cluster agent's plumbing, without a cluster: typed wake-ups that are never lost,
which changes wake whom, the failures a cluster reports, and which Node CRs the mirror may
remove."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from corral.core.api import names
from corral.core.clusters import observe
from corral.core.kube import kinds
from corral.core.kube.informer import Informer
from corral.core.kube.status import StatusWriter
from corral.core.projects import downstream
from corral.operator.downstream import drain, nodes, projects
from corral.operator.downstream.agent import Failures
from corral.operator.state import BY_CLUSTER, SpecChanges, State
from corral.operator.wakeups import Wake, Wakeups

NOW = datetime.datetime(2026, 2, 3, 4, 5, 6, tzinfo=datetime.UTC)


async def test_a_reason_given_during_a_pass_is_kept_for_the_next() -> None:
    wakeups = Wakeups()
    wakeups.add(Wake.PROJECT)
    await wakeups.wait()
    assert wakeups.take() == {Wake.PROJECT}
    wakeups.add(Wake.NAMESPACE)  # while the pass runs
    await asyncio.wait_for(wakeups.wait(), 1)
    assert wakeups.take() == {Wake.NAMESPACE}
    assert wakeups.take() == set()


async def test_a_timed_reason_falls_due_and_an_earlier_one_stands() -> None:
    wakeups = Wakeups()
    wakeups.after(0.01, Wake.RETRY)
    wakeups.after(60, Wake.RETRY)
    await asyncio.wait_for(wakeups.wait(), 1)
    assert wakeups.take() == {Wake.RETRY}


async def test_a_timer_given_while_waiting_for_a_later_one_is_kept() -> None:
    wakeups = Wakeups()
    wakeups.after(60, Wake.TIMER)
    waiting = asyncio.create_task(wakeups.wait())
    await asyncio.sleep(0)  # the waiter is now waiting for the timer a minute away
    wakeups.after(0.01, Wake.POD)
    await asyncio.wait_for(waiting, 5)
    assert wakeups.take() == {Wake.POD}


async def test_a_waiter_cancelled_as_a_reason_comes_is_cancelled() -> None:
    # The loop is cancelled when its cluster goes, often in the same moment the cluster's
    # change wakes it: losing that cancellation left the loop running after its stop.
    for later in (60, None):
        wakeups = Wakeups()
        if later is not None:
            wakeups.after(later, Wake.TIMER)
        waiting = asyncio.create_task(wakeups.wait())
        await asyncio.sleep(0)
        wakeups.add(Wake.SPEC)
        waiting.cancel()
        done, _ = await asyncio.wait([waiting], timeout=5)
        assert done and waiting.cancelled()


def test_a_nodes_heartbeat_changes_nothing_the_agent_keeps() -> None:
    def node(heartbeat: str, ready: str = "True") -> dict[str, Any]:
        return {
            "metadata": {"name": "n1", "resourceVersion": heartbeat, "labels": {"a": "b"},
                         "managedFields": [{"manager": "kubelet", "time": heartbeat}]},
            "spec": {"providerID": "kwok://n1", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                                "message": "ok", "lastHeartbeatTime": heartbeat,
                                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "images": [{"names": ["busybox"], "sizeBytes": 1}],
            },
        }  # fmt: skip

    kept = observe.observed_node(node("1"))
    assert kept["metadata"] == {"name": "n1", "resourceVersion": "1", "labels": {"a": "b"}}
    assert kept["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}
    ]
    assert "images" not in kept["status"]
    later = observe.observed_node(node("2"))
    assert {**later, "metadata": {**later["metadata"], "resourceVersion": "1"}} == kept
    assert observe.observed_node(node("3", ready="False"))["status"] != kept["status"]
    # What the mirror writes of the node is the same from the kept copy as from the node.
    assert observe.node_status(kept, None) == observe.node_status(node("1"), None)
    assert observe.node_conditions(kept, True, "") == observe.node_conditions(node("1"), True, "")


def obj(name: str, generation: int, namespace: str = "c-1", **meta: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                "generation": generation, **meta}  # fmt: skip
    return {"metadata": metadata, "spec": {}}


def test_only_a_change_of_what_an_object_asks_for_counts() -> None:
    changes = SpecChanges()
    assert changes.changed("ADDED", obj("p", 1))
    assert not changes.changed("MODIFIED", obj("p", 1))  # a status write
    assert changes.changed("MODIFIED", obj("p", 2))
    assert changes.changed("MODIFIED", obj("p", 2, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert changes.changed("DELETED", obj("p", 2))


def test_a_change_wakes_whatever_runs_for_its_cluster_and_only_while_it_runs() -> None:
    state = State(None, lambda: NOW)  # type: ignore[arg-type]
    woken: list[Wake] = []
    hook = state.projects._on_change
    assert hook is not None
    with state.attached("c-1", woken.append):
        hook("ADDED", obj("p-1", 1))
        hook("MODIFIED", obj("p-1", 1))
        hook("ADDED", obj("p-2", 1, namespace="c-2"))
    hook("MODIFIED", obj("p-1", 2))
    assert woken == [Wake.PROJECT]


def test_a_full_look_reports_only_what_failed_in_it() -> None:
    failures = Failures("c-1")
    failures.record("pod list", "boom")
    failures.replace("node ", {"a": "denied", "b": "denied"})
    failures.record("projects", "broke")
    failures.begin_look()
    failures.record("projects", "broke again")
    failures.replace("node ", {"a": "denied"})
    failures.end_look()
    assert failures.current == {"node a": "denied", "projects": "broke again"}
    failures.record("projects", None)
    assert failures.current == {"node a": "denied"}


class Kube:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    async def delete(self, _: Any, name: str, **__: Any) -> None:
        self.deleted.append(name)


def record(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "c-1", "labels": labels}, "spec": {}}


async def test_the_mirror_removes_only_the_records_it_made() -> None:
    kube = Kube()

    def namespace(o: dict[str, Any]) -> list[str]:
        return [o["metadata"]["namespace"]]

    records = Informer(kube, kinds.Node, {BY_CLUSTER: namespace})  # type: ignore[arg-type]
    records.put(record("m-mirrored", dict(nodes.MIRRORED)))
    records.put(record("m-pool", {"other": "label"}))
    writer = StatusWriter(kube, nodes.FIELD_MANAGER, lambda: NOW)  # type: ignore[arg-type]
    drains = drain.Drains("c-1", records, writer)
    mirror = nodes.NodeMirror("c-1", kube, records, writer, drains)  # type: ignore[arg-type]
    assert await mirror.sync(kube, [], {}) == {}  # type: ignore[arg-type]
    assert kube.deleted == ["m-mirrored"]
    assert records.get("c-1/m-mirrored") is None and records.get("c-1/m-pool") is not None


def test_the_project_syncs_record_keeps_what_a_pass_compares_and_no_secret() -> None:
    copy = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "data": {"password": "c2VjcmV0"},
        "metadata": {
            "name": "db", "namespace": "ns1", "resourceVersion": "9", "uid": "u",
            "labels": {"management.svc.io/managed-by": "corral"},
            "annotations": {downstream.ANNOTATION_HASH: "h1", "kubectl.io/last": "x" * 4096},
            "managedFields": [{"manager": "corral"}],
        },
    }  # fmt: skip
    kept = projects.owned_record("Secret", copy)
    assert kept == {
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": "db", "namespace": "ns1", "resourceVersion": "9",
                     "annotations": {downstream.ANNOTATION_HASH: "h1"}},
    }  # fmt: skip
    assert downstream.key_of(kept) == ("Secret", "ns1", "db")
    assert downstream.stamp(kept) == downstream.stamp(copy) == "h1"


def test_the_project_sync_watches_each_kind_it_writes_and_only_its_own() -> None:
    assert {o.kind for o in projects.OWNED} == set(projects.KIND_RESOURCES)
    assert {o.kind for o in projects.OWNED if o.namespace is None} == {
        "ClusterRole", "ClusterRoleBinding"
    }  # fmt: skip
    for owned in projects.OWNED:
        assert owned.labels[names.LABEL_MANAGED_BY] == names.MANAGED_BY
