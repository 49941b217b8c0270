"""Three operator replicas share the downstream clusters (docs/design/operator-sharding.md):
each cluster runs on exactly one of them, and when one is killed while its clusters' nodes are
being changed, the survivors take its clusters within 15 s and no change is lost.

Who runs a cluster is observed twice, independently: the holder its shard's Lease names, and
what each replica's log says it started and stopped. That a cluster is managed is observed in
the cluster itself: a taint written to a Node CR through /v3 reaches the downstream node only
through the agent of the replica running the cluster.
"""

from __future__ import annotations

import datetime
import itertools
import os
import re
import signal
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.clusters import shards
from corral.devenv.environment import Environment
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import set_setting, stack_options

CLUSTERS = 4
REPLICAS = 3
HANDOVER = 15.0  # seconds a cluster may go unmanaged (issue 25)
TAINT = "e2e.svc.io/write"
# The writer's pace per cluster: a change every half second, so that a cluster's gap is
# measured to within it.
WRITE_EVERY = 0.5
LOG_LINE = re.compile(r"^(\S+ \S+) INFO \S+ cluster (\S+): (runs|stopped) on (\S+)$", re.M)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    options = stack_options(tmp_path_factory.mktemp("shards"), devkube,
                            downstream_clusters=CLUSTERS, nodes_per_cluster=1,
                            operators=REPLICAS)  # fmt: skip
    with Environment(options) as stack:
        set_setting(stack, "api-rate-limit-per-minute", "100000")
        yield stack


@pytest.fixture(scope="module")
def api(env: Environment) -> Api:
    return Api(env.api_url, ssl.create_default_context(cafile=str(env.ca_path)), env.admin_token)


@dataclass
class Cluster:
    id: str
    node: str  # the downstream node's name
    record: str  # its Node CR's /v3 id
    core: k8s.CoreV1Api
    written: list[tuple[int, float]] = field(default_factory=list)  # (value, when written)
    seen: dict[int, float] = field(default_factory=dict)  # value -> when first seen downstream


def leases(management: k8s.ApiClient) -> dict[str, k8s.V1Lease]:
    found = k8s.CoordinationV1Api(management).list_namespaced_lease(
        "svc-system", label_selector="management.svc.io/operator-lease"
    )
    return {lease.metadata.name: lease for lease in found.items}


def holders(management: k8s.ApiClient, cluster_ids: list[str]) -> dict[str, str]:
    """The replica each cluster's shard Lease names, when that replica's own Lease is current."""
    now = datetime.datetime.now(datetime.UTC)
    found = leases(management)
    live = {
        lease.spec.holder_identity
        for name, lease in found.items()
        if name.startswith("corral-operator-member-") and current(lease, now)
    }
    result: dict[str, str] = {}
    for cluster in cluster_ids:
        lease = found.get(f"corral-operator-shard-{shards.shard_of(cluster)}")
        holder = lease.spec.holder_identity if lease is not None else None
        if holder in live:
            result[cluster] = holder
    return result


def current(lease: k8s.V1Lease, now: datetime.datetime) -> bool:
    spec = lease.spec
    if not spec.holder_identity or spec.renew_time is None:
        return False
    return bool(spec.renew_time + datetime.timedelta(seconds=spec.lease_duration_seconds) > now)


def running(replicas: list[Process]) -> dict[str, list[str]]:
    """The replicas whose log says, last, that they run each cluster."""
    last: dict[tuple[str, str], str] = {}
    for process in replicas:
        for match in LOG_LINE.finditer(process.log_path.read_text(errors="replace")):
            _, cluster, what, replica = match.groups()
            last[(cluster, replica)] = what
    found: dict[str, list[str]] = {}
    for (cluster, replica), what in sorted(last.items()):
        if what == "runs":
            found.setdefault(cluster, []).append(replica)
    return found


Span = tuple[str, datetime.datetime, datetime.datetime]  # replica, from, until


def spans(replicas: list[Process], victim: str, killed: datetime.datetime) -> dict[str, list[Span]]:
    """When each replica ran each cluster, from the replicas' logs: a run ends where the log
    says it stopped, and the victim's at the kill."""
    found: dict[str, list[Span]] = {}
    end = datetime.datetime.now()
    for process in replicas:
        lines = [
            (datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f"), m[2], m[3], m[4])
            for m in LOG_LINE.finditer(process.log_path.read_text(errors="replace"))
        ]
        lives = [lines]
        if process.name == victim:  # its first life ended with the kill
            lives = [[x for x in lines if x[0] < killed], [x for x in lines if x[0] >= killed]]
        for number, life in enumerate(lives):
            started: dict[str, datetime.datetime] = {}
            for when, cluster, what, replica in life:
                if what == "runs":
                    started[cluster] = when
                elif cluster in started:
                    found.setdefault(cluster, []).append((replica, started.pop(cluster), when))
            until = killed if len(lives) > 1 and number == 0 else end
            for cluster, since in started.items():
                found.setdefault(cluster, []).append((process.name, since, until))
    return found


def managed_once(
    management: k8s.ApiClient, ids: list[str], replicas: list[Process]
) -> dict[str, str] | None:
    """Each cluster's replica, when its shard's Lease and the logs name the same single live
    replica for every cluster; None until then."""
    held = holders(management, ids)
    logged = running(replicas)
    if set(held) != set(ids) or any(logged.get(c) != [held[c]] for c in ids):
        return None
    return held


def write(api: Api, cluster: Cluster, value: int) -> None:
    taint = {"key": TAINT, "value": str(value), "effect": "NoSchedule"}
    response = api.put(f"/v3/clusters/{cluster.id}/nodes/{cluster.record}",
                       {"desiredNodeTaints": [taint]})  # fmt: skip
    assert response.status == 200, response.body
    cluster.written.append((value, time.monotonic()))


def observe(cluster: Cluster, stop: threading.Event) -> None:
    """Record when each value first shows on the downstream node, read with the official
    client, never through corral."""
    while not stop.is_set():
        try:
            node = cluster.core.read_node(cluster.node)
        except k8s.ApiException:
            continue
        for taint in node.spec.taints or []:
            if taint.key == TAINT:
                cluster.seen.setdefault(int(taint.value), time.monotonic())
        stop.wait(0.1)


def writer(api: Api, clusters: list[Cluster], stop: threading.Event) -> None:
    value = 0
    while not stop.is_set():
        value += 1
        for cluster in clusters:
            write(api, cluster, value)
        stop.wait(WRITE_EVERY)


def test_a_replica_killed_under_load_hands_its_clusters_over_within_15_seconds(
    env: Environment, api: Api
) -> None:
    management = k8s_config.new_client_from_config(str(env.management_kubeconfig))
    replicas = [p for p in env.corral if p.name.startswith("operator")]
    assert len(replicas) == REPLICAS
    ids = [*env.cluster_ids, "local"]

    # Every cluster, the management cluster's own included, runs on exactly one replica.
    before = wait_for("each cluster on one replica",
                      lambda: managed_once(management, ids, replicas), 60, replicas)  # fmt: skip
    print(f"\nbefore the kill: {before}")

    clusters: list[Cluster] = []
    for cluster_id, kubeconfig in zip(env.cluster_ids, env.downstream_kubeconfigs(), strict=True):
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(kubeconfig)))
        node = core.list_node().items[0].metadata.name
        records = api.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]
        record = next(r["id"] for r in records if r["name"] == node)
        clusters.append(Cluster(cluster_id, node, record, core))

    stop = threading.Event()
    threads = [threading.Thread(target=observe, args=(c, stop), daemon=True) for c in clusters]
    threads.append(threading.Thread(target=writer, args=(api, clusters, stop), daemon=True))
    for thread in threads:
        thread.start()
    try:
        # The writes flow everywhere before the kill.
        wait_for("the first writes downstream", lambda: all(c.seen for c in clusters), 30)
        # The victim: the replica running the most of the downstream clusters.
        counts = {p.name: sum(before[c.id] == p.name for c in clusters) for p in replicas}
        victim = next(p for p in replicas if p.name == max(counts, key=lambda n: counts[n]))
        orphans = [c for c in clusters if before[c.id] == victim.name]
        os.kill(victim.pid, signal.SIGKILL)
        killed, killed_at = time.monotonic(), datetime.datetime.now()
        survivors = [p for p in replicas if p is not victim]

        def handed_over(cluster: Cluster) -> float | None:
            """When a value written after the kill first showed on the cluster's node."""
            after = [v for v, when in cluster.written if when > killed]
            shown = [cluster.seen[v] for v in after if v in cluster.seen]
            return min(shown) if shown else None

        # Awaited by condition, for as long as a cluster may go unmanaged.
        wait_for(
            "every cluster managed again",
            lambda: all(handed_over(c) is not None for c in clusters),
            HANDOVER - (time.monotonic() - killed),
        )
        gaps = {c.id: round(handed_over(c) - killed, 1) for c in clusters}  # type: ignore[operator]
        print(f"killed {victim.name} (pid {victim.pid}), which ran "
              f"{[c.id for c in orphans]}; seconds from the kill to the first write after it "
              f"seen downstream, by cluster: {gaps}")  # fmt: skip
        # A few more writes reach the new owners.
        wait_for("more writes after the hand-over",
                 lambda: all(len([v for v, w in c.written if w > killed]) > 10 for c in clusters),
                 30)  # fmt: skip
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)

    # No update lost: the last write to every node is on it.
    for cluster in clusters:
        last = str(cluster.written[-1][0])
        wait_for(f"the last write on {cluster.id}", lambda c=cluster, v=last: taint_of(c) == v, 30)

    # The killed replica's clusters now run on exactly one survivor each, and no survivor
    # gave up one of its own.
    after = wait_for("each cluster on one survivor",
                     lambda: managed_once(management, ids, survivors), 30)  # fmt: skip
    print(f"after the kill: {after}")
    assert victim.name not in after.values()
    for cluster_id, replica in before.items():
        if replica != victim.name:
            assert after[cluster_id] == replica, (cluster_id, before, after)

    # Started again under its name, the replica wins back the same shards, each handed over
    # by the survivor running it; the writes still land.
    replicas = [env.restart_operator(victim.name), *survivors]
    wait_for("each cluster back on its first replica",
             lambda: managed_once(management, ids, replicas) == before, 30)  # fmt: skip
    for cluster in clusters:
        write(api, cluster, 10**6)
    for cluster in clusters:
        wait_for(f"a write on {cluster.id} after the rejoin",
                 lambda c=cluster: taint_of(c) == str(10**6), 30)  # fmt: skip

    # Stopped gracefully (a rollout), a replica stops its clusters, lets its shards go and
    # deletes its member Lease: the others take them without waiting for any Lease to expire.
    leaving = next(p for p in replicas if p.name != victim.name)
    leaving.terminate()
    leaving.wait_or_kill(time.monotonic() + 30)
    stayed = [p for p in replicas if p is not leaving]
    member = f"corral-operator-member-{leaving.name}"
    wait_for("its member Lease gone", lambda: member not in leases(management), 10)
    moved = wait_for("each cluster on one of the two left",
                     lambda: managed_once(management, ids, stayed), 10)  # fmt: skip
    print(f"after {leaving.name} left: {moved}")
    assert leaving.name not in moved.values()

    # Never two replicas at once: each cluster's runs, as the replicas' logs tell them, follow
    # one another without overlapping, from the start through the kill and the rejoin.
    ran = spans(replicas, victim.name, killed_at)
    for cluster_id in ids:
        runs = sorted(ran[cluster_id], key=lambda span: span[1])
        for (first, _, until), (second, since, _) in itertools.pairwise(runs):
            assert since >= until, f"{cluster_id} ran on {first} and {second} at once: {runs}"
        shown = ", ".join(f"{r} {a:%H:%M:%S.%f}-{b:%H:%M:%S.%f}" for r, a, b in runs)
        print(f"{cluster_id} ran on: {shown}")


def taint_of(cluster: Cluster) -> str | None:
    node = cluster.core.read_node(cluster.node)
    return next((t.value for t in node.spec.taints or [] if t.key == TAINT), None)
