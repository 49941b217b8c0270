"""Hosted control planes on the real node: how long an rke2 cluster takes from POST to Ready
(median of CLUSTERS, one after another, each with the timeline of where its time went), what
each control plane uses once up (memory working set and CPU, from the kubelet's summary), and so
how many fit on this machine; how long DELETE takes; then AT_ONCE clusters created together and
how long until all are Ready, where the CPU went meanwhile (core-seconds per component), the
containers' restarts and the kubelet's probe failures and back-offs, each one's timeline and,
for those not Ready in time, what holds them (their conditions, provisioning step and pods).

`BENCH_PROVISIONING=together` runs only the clusters created together (`one` only those one
after another)."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench import timeline
from tests.bench.common import get_json, send_json, stack
from tests.bench.cpu import CpuMeter

CLUSTERS = 3
AT_ONCE = 10
PARTS = ("one", "together")
READY_TIMEOUT = 300.0
# What one control plane takes while it starts, above its idle working set: fewer clusters are
# created at once when the machine has not that much to spare.
STARTING_GIB = 0.5
# The memory a shared development machine keeps for everything else (docs/provisioning.md).
RESERVE_GIB = 6.0
GIB = 1024**3


def mem_available() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024 / GIB
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def is_ready(body: dict[str, Any]) -> bool:
    conditions = (body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def ready(env: Environment, cluster: str) -> bool:
    return is_ready(get_json(env, f"{env.api_url}/v3/clusters/{cluster}"))


def ready_ones(env: Environment) -> set[str]:
    """The clusters Ready now, in one request: a GET per cluster twice a second cost the
    machine more CPU than some of the components measured."""
    listed = get_json(env, f"{env.api_url}/v3/clusters?limit=-1")["data"]
    return {body["id"] for body in listed if is_ready(body)}


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


def create(env: Environment, name: str) -> str:
    body = {"name": name, "rke2Config": {"kubernetesVersion": "v1.36.3"}}
    cluster: str = send_json(env, "POST", f"{env.api_url}/v3/clusters", body)["id"]
    return cluster


def show_timeline(
    env: Environment, cluster: str, posted: float, answered: float, seen: float | None
) -> None:
    """Where the cluster's time went, from its POST to Ready (wall clock); `seen` None: not
    Ready."""
    kube = k8s_config.new_client_from_config(str(env.management_kubeconfig))
    api, apps = k8s.CoreV1Api(kube), k8s.AppsV1Api(kube)
    milestones = [(answered, "POST answered")]
    milestones += timeline.operator_lines(env.corral[0].log_path, cluster)
    milestones += timeline.kube_milestones(api, apps, cluster)
    milestones += timeline.cluster_milestones(get_json(env, f"{env.api_url}/v3/clusters/{cluster}"))
    if seen is not None:
        milestones.append((seen, "Ready seen by the client"))
    print(timeline.render(posted, milestones), flush=True)


def show_holding(env: Environment, cluster: str) -> None:
    """What holds a cluster that is not Ready: its conditions and provisioning step, and what
    each of its control plane's pods is doing."""
    body = get_json(env, f"{env.api_url}/v3/clusters/{cluster}")
    status = body.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            said = f"{condition.get('reason', '')}: {condition.get('message', '')}"
            print(f"  condition {condition['type']} {condition.get('status')} {said}"[:300])
    provisioning = status.get("provisioning") or {}
    print(f"  provisioning: {provisioning.get('step')} {provisioning.get('message', '')}"[:300])
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    for pod in api.list_namespaced_pod(cluster).items:
        print(f"  {timeline.pod_state(pod)}"[:400])
    print(flush=True)


def show_node(env: Environment) -> None:
    """The real node's pods against its capacity: a node that takes no more pods holds every
    cluster whose pods land on it."""
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    for node in env.real_nodes:
        capacity = api.read_node(node.name).status.allocatable.get("pods")
        pods = api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node.name}").items
        running = [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]
        print(f"node {node.name}: {len(running)} pods of {capacity} allocatable", flush=True)


def troubles(env: Environment, clusters: list[str]) -> str:
    """What the kubelet did to the clusters' containers: restarts by container, and its
    probe failures, back-offs and kills (the namespaces' events, counted)."""
    api = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    restarts: dict[str, int] = {}
    events: dict[str, int] = {}
    for cluster in clusters:
        for pod in api.list_namespaced_pod(cluster).items:
            statuses = [*(pod.status.init_container_statuses or []),
                        *(pod.status.container_statuses or [])]  # fmt: skip
            for status in statuses:
                restarts[status.name] = restarts.get(status.name, 0) + status.restart_count
        for event in api.list_namespaced_event(cluster).items:
            if event.reason in ("Unhealthy", "BackOff", "Killing"):
                events[event.reason] = events.get(event.reason, 0) + (event.count or 1)
    said = ", ".join(f"{name} {count}" for name, count in sorted(restarts.items()) if count)
    kubelet = ", ".join(f"{reason} {count}" for reason, count in sorted(events.items()))
    return f"container restarts: {said or 'none'}; kubelet events: {kubelet or 'none'}"


def delete(env: Environment, clusters: list[str]) -> float:
    """Seconds until all of `clusters` are gone."""
    began = time.monotonic()
    for cluster in clusters:
        send_json(env, "DELETE", f"{env.api_url}/v3/clusters/{cluster}")
    for cluster in clusters:
        wait_for(f"{cluster} gone", lambda c=cluster: gone(env, c), READY_TIMEOUT)
    return time.monotonic() - began


def at_once(env: Environment) -> None:
    """AT_ONCE clusters created together (as many as memory allows): each one's POST to Ready
    and how long until all are Ready; then each one's timeline, and what holds those that are
    not."""
    count = min(AT_ONCE, int((mem_available() - RESERVE_GIB) / STARTING_GIB))
    meter = CpuMeter(env)
    meter.start()
    began, clusters = time.monotonic(), []
    posted: dict[str, tuple[float, float]] = {}  # the POST sent and answered (wall clock)
    for index in range(count):
        sent = time.time()
        cluster = create(env, f"together-{index}")
        posted[cluster] = (sent, time.time())
        clusters.append(cluster)
    posting = time.monotonic() - began
    pending, seconds, seen = set(clusters), [], {}
    while pending and time.monotonic() - began < READY_TIMEOUT:
        for cluster in pending & ready_ones(env):
            pending.discard(cluster)
            seconds.append(time.monotonic() - began)
            seen[cluster] = time.time()
        time.sleep(0.25)
    spent = meter.stop()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    if pending:
        print(f"{count} clusters created at once: {len(seconds)} Ready after "
              f"{READY_TIMEOUT:.0f} s; load average {load}", flush=True)  # fmt: skip
    else:
        print(
            f"{count} clusters created at once (POSTs took {posting:.1f} s): all Ready after "
            f"{max(seconds):.1f} s (first {min(seconds):.1f} s, median "
            f"{statistics.median(seconds):.1f} s); load average {load}",
            flush=True,
        )
    print(spent, flush=True)
    print(troubles(env, clusters), flush=True)
    show_node(env)
    for index, cluster in enumerate(clusters):
        sent, answered = posted[cluster]
        state = "Ready" if cluster in seen else "NOT Ready"
        print(f"together-{index} ({cluster}), {state}:", flush=True)
        show_timeline(env, cluster, sent, answered, seen.get(cluster))
        if cluster in pending:
            show_holding(env, cluster)
    print(f"DELETE of {count} clusters: all gone after {delete(env, clusters):.1f} s")


def one_at_a_time(env: Environment) -> None:
    before = mem_available()
    clusters, seconds = [], []
    meter = CpuMeter(env)
    meter.start()
    for index in range(CLUSTERS):
        began, posted = time.monotonic(), time.time()
        cluster = create(env, f"bench-{index}")
        answered = time.time()
        wait_for(f"{cluster} Ready", lambda c=cluster: ready(env, c), READY_TIMEOUT)
        seen = time.time()
        seconds.append(time.monotonic() - began)
        clusters.append(cluster)
        print(f"cluster {index + 1}: POST to Ready {seconds[-1]:.1f} s; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        show_timeline(env, cluster, posted, answered, seen)
    print(f"the {CLUSTERS} starts, one after another:\n{meter.stop()}", flush=True)
    print(troubles(env, clusters), flush=True)
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
    print(f"DELETE of {CLUSTERS} clusters: all gone after {delete(env, clusters):.1f} s")


def main() -> None:
    parts = os.environ.get("BENCH_PROVISIONING", ",".join(PARTS)).split(",")
    if unknown := set(parts) - set(PARTS):
        raise SystemExit(f"BENCH_PROVISIONING: no part {', '.join(sorted(unknown))} "
                         f"({', '.join(PARTS)})")  # fmt: skip
    with stack(0, real_nodes=1, hosted_control_planes=True) as env:
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        if "one" in parts:
            one_at_a_time(env)
        if "together" in parts:
            at_once(env)
