"""What the operator costs while nothing happens: 1, 5 and 20 imported downstream clusters of
50 kwok nodes each (`BENCH_IDLE_CLUSTERS`, `BENCH_IDLE_NODES`), measured over a minute once
every cluster is active and every node is mirrored as a Ready Node CR. Printed per run: the
operator's CPU (% of one core) and resident memory, and its open connections to each
downstream cluster's API server (one per watch, plus the client's pooled ones); then the slope
between the smallest and the largest run, the cost of one more cluster."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from corral.devenv.environment import Environment
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for
from tests.bench.common import cpu_seconds, get_json, machine, rss_mib, stack

CLUSTERS = [int(n) for n in os.environ.get("BENCH_IDLE_CLUSTERS", "1,5,20").split(",")]
NODES = int(os.environ.get("BENCH_IDLE_NODES", "50"))
WINDOW = float(os.environ.get("BENCH_IDLE_SECONDS", "60"))
SETTLE_TIMEOUT = 900.0
ESTABLISHED = "01"


@dataclass(frozen=True)
class Idle:
    clusters: int
    cpu_percent: float
    rss_mib: float
    connections: list[int]


def settled(env: Environment) -> bool:
    """Every downstream cluster active and each of its nodes a Ready Node CR."""
    clusters = get_json(env, f"{env.api_url}/v3/clusters?limit=-1")["data"]
    active = {c["id"] for c in clusters if c.get("state") == "active"}
    if not set(env.cluster_ids) <= active:
        return False
    for cluster in env.cluster_ids:
        nodes = get_json(env, f"{env.api_url}/v3/clusters/{cluster}/nodes?limit=-1")["data"]
        if sum(1 for n in nodes if n.get("state") == "active") < NODES:
            return False
    return True


def connections_to(process: Process, ports: list[int]) -> list[int]:
    """The process's established TCP connections to each of these local ports."""
    inodes = set()
    for fd in Path(f"/proc/{process.pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    counts = dict.fromkeys(ports, 0)
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{process.pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == ESTABLISHED and fields[9] in inodes and port in counts:
                counts[port] += 1
    return [counts[p] for p in ports]


def measure(clusters: int) -> Idle:
    with stack(downstream_clusters=clusters, nodes_per_cluster=NODES) as env:
        (operator,) = [p for p in env.corral if p.name == "operator"]
        began = time.monotonic()
        wait_for("every cluster active, every node mirrored", lambda: settled(env),
                 SETTLE_TIMEOUT, env.corral, interval=1.0)  # fmt: skip
        print(f"{clusters} clusters x {NODES} nodes settled {time.monotonic() - began:.0f} s "
              "after the stack was up", flush=True)  # fmt: skip
        cpu, began = cpu_seconds(operator), time.monotonic()
        time.sleep(WINDOW)  # the measured window itself: nothing to await, only time to pass
        percent = (cpu_seconds(operator) - cpu) / (time.monotonic() - began) * 100
        ports = [plane.port for plane in env.downstreams]
        return Idle(clusters, percent, rss_mib(operator), connections_to(operator, ports))


def main() -> None:
    print(f"machine: {machine()}, {NODES} kwok nodes a cluster, {WINDOW:.0f} s window")
    runs = [measure(n) for n in CLUSTERS]
    print(f"{'clusters':>8} {'CPU % core':>10} {'per cluster':>11} {'RSS MiB':>8} "
          f"{'connections to each cluster':>28}")  # fmt: skip
    for run in runs:
        spread = f"{min(run.connections)}-{max(run.connections)}"
        share = run.cpu_percent / run.clusters
        print(f"{run.clusters:>8} {run.cpu_percent:>10.2f} {share:>11.3f} "
              f"{run.rss_mib:>8.1f} {spread:>28}")  # fmt: skip
    if len(runs) > 1:
        low, high = runs[0], runs[-1]
        more = high.clusters - low.clusters
        print(f"one more cluster costs {(high.cpu_percent - low.cpu_percent) / more:.3f} % of "
              f"a core and {(high.rss_mib - low.rss_mib) / more:.2f} MiB "
              f"({low.clusters} -> {high.clusters} clusters)")  # fmt: skip
