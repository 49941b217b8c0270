"""Hosted control planes on the real node: how long an rke2 cluster takes from POST to Ready
(median of CLUSTERS), what each control plane uses once up (memory working set and CPU, from
the kubelet's summary), and so how many fit on this machine; then how long DELETE takes."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import get_json, send_json, stack

CLUSTERS = 3
READY_TIMEOUT = 300.0
# The memory a shared development machine keeps for everything else (docs/provisioning.md).
RESERVE_GIB = 6.0
GIB = 1024**3


def mem_available() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024 / GIB
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def ready(env: Environment, cluster: str) -> bool:
    body = get_json(env, f"{env.api_url}/v3/clusters/{cluster}")
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def gone(env: Environment, cluster: str) -> bool:
    try:
        get_json(env, f"{env.api_url}/v3/clusters/{cluster}")
    except Exception:  # noqa: BLE001 - a 404 is what is awaited
        return True
    return False


def usage(env: Environment, clusters: list[str]) -> dict[str, tuple[float, float]]:
    """Per cluster: working set (MiB) and CPU (millicores) of its control-plane pods now."""
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    found = {cluster: (0.0, 0.0) for cluster in clusters}
    for node in env.real_nodes:
        summary: dict[str, Any] = api.connect_get_node_proxy_with_path(
            node.name, "stats/summary", _preload_content=False
        ).json()
        for pod in summary.get("pods", []):
            namespace = pod["podRef"]["namespace"]
            if namespace in found:
                memory, cpu = found[namespace]
                memory += pod.get("memory", {}).get("workingSetBytes", 0) / 2**20
                cpu += pod.get("cpu", {}).get("usageNanoCores", 0) / 1e6
                found[namespace] = (memory, cpu)
    return found


def main() -> None:
    with stack(0, real_nodes=1, hosted_control_planes=True) as env:
        before = mem_available()
        clusters, seconds = [], []
        for index in range(CLUSTERS):
            began = time.monotonic()
            body = {"name": f"bench-{index}", "rke2Config": {"kubernetesVersion": "v1.36.3"}}
            cluster = send_json(env, "POST", f"{env.api_url}/v3/clusters", body)["id"]
            wait_for(f"{cluster} Ready", lambda c=cluster: ready(env, c), READY_TIMEOUT)
            seconds.append(time.monotonic() - began)
            clusters.append(cluster)
            print(f"cluster {index + 1}: POST to Ready {seconds[-1]:.1f} s", flush=True)
        # A quiet minute, so that start-up work is over before usage is read.
        time.sleep(60)
        after = mem_available()
        per_cluster = usage(env, clusters)
        memory = statistics.median(m for m, _ in per_cluster.values())
        cpu = statistics.median(c for _, c in per_cluster.values())
        delta = (before - after) / CLUSTERS
        fit = int((before - RESERVE_GIB) / delta) if delta > 0 else 0
        print(
            f"POST to Ready: median {statistics.median(seconds):.1f} s of {CLUSTERS} "
            f"(min {min(seconds):.1f}, max {max(seconds):.1f})\n"
            f"per control plane, idle: working set {memory:.0f} MiB, CPU {cpu:.0f} millicores "
            f"(kubelet summary, median of {CLUSTERS})\n"
            f"MemAvailable {before:.1f} -> {after:.1f} GiB: {delta:.2f} GiB per cluster; "
            f"keeping {RESERVE_GIB:.0f} GiB free, about {fit} fit on this machine by memory"
        )
        began = time.monotonic()
        for cluster in clusters:
            send_json(env, "DELETE", f"{env.api_url}/v3/clusters/{cluster}")
        for cluster in clusters:
            wait_for(f"{cluster} gone", lambda c=cluster: gone(env, c), READY_TIMEOUT)
        print(f"DELETE of {CLUSTERS} clusters: all gone after {time.monotonic() - began:.1f} s")
