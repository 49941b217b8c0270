"""Real machines of the local cloud joining a k3s cluster corral provisioned (issue 23): the
stack as `make run` starts it by default (one such cluster with one pool machine), then how
long a machine takes from being made to a Ready node when its root runs the node command (p50
and p90 of JOINS), how long a pod takes from the POST of its workload to Running on a real
machine, how long a pool takes from 0 to POOL machines Ready, and what one machine holds in
memory (every process of it: containerd, kubelet, kube-proxy, flannel, its pods)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from corral.devenv import images
from corral.devenv.environment import Environment
from corral.devenv.host import pids_in_cgroup
from corral.devenv.waiting import wait_for
from tests.bench.common import ROOT, get_json, send_json, stack

JOINS = 10
PODS = 5
POOL = 5
TIMEOUT = 300.0


def nodes(env: Environment, cluster: str) -> dict[str, dict[str, Any]]:
    listed = get_json(env, f"{env.api_url}/v3/clusters/{cluster}/nodes")["data"]
    return {n["requestedHostname"]: n for n in listed}


def ready(env: Environment, cluster: str, hostname: str) -> bool:
    return nodes(env, cluster).get(hostname, {}).get("state") == "active"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * fraction), len(ordered) - 1)]


def rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone since it was listed
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def joins(env: Environment, cluster: str) -> None:
    token = get_json(env, f"{env.api_url}/v3/clusterregistrationtokens?clusterId={cluster}")
    command = token["data"][0]["nodeCommand"]
    seconds = []
    for index in range(JOINS):
        began = time.monotonic()
        machine = env.cloud.create(f"bench-join-{index}", hostname=f"join{index}")
        done = machine.exec(["sh", "-c", command], timeout=TIMEOUT)
        assert done.rc == 0, done.stderr.decode(errors="replace")[-2000:]
        wait_for(f"join{index} Ready", lambda h=f"join{index}": ready(env, cluster, h), TIMEOUT)
        seconds.append(time.monotonic() - began)
        print(f"join {index + 1}: machine made -> node Ready {seconds[-1]:.1f} s", flush=True)
    print(f"node command: machine made -> node Ready p50 {statistics.median(seconds):.1f} s, "
          f"p90 {percentile(seconds, 0.9):.1f} s of {JOINS}")  # fmt: skip
    memory = [sum(rss_mib(p) for p in pids_in_cgroup(m.cgroup)) for m in env.cloud.machines()]
    print(f"memory per machine (RSS of all its processes): median {statistics.median(memory):.0f}"
          f" MiB of {len(memory)}")  # fmt: skip


def pods(env: Environment, cluster: str) -> None:
    project = send_json(env, "POST", f"{env.api_url}/v3/projects",
                        {"name": "bench", "clusterId": cluster})["id"]  # fmt: skip
    namespace = send_json(env, "POST", f"{env.api_url}/v3/clusters/{cluster}/namespaces",
                          {"name": "bench", "projectId": project})["name"]  # fmt: skip
    container = {"name": "c", "image": images.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                 "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 1d & wait"]}  # fmt: skip
    seconds = []
    for index in range(PODS):
        body = {"name": f"bench-{index}", "namespaceId": namespace, "scale": 1,
                "containers": [container]}  # fmt: skip
        began = time.monotonic()
        workload = send_json(env, "POST", f"{env.api_url}/v3/projects/{project}/workloads", body)
        url = f"{env.api_url}/v3/projects/{project}/pods?workloadId={workload['id']}"
        wait_for("its pod running",
                 lambda u=url: any(p.get("state") == "running" for p in get_json(env, u)["data"]),
                 TIMEOUT)  # fmt: skip
        seconds.append(time.monotonic() - began)
    print(f"workload POST -> its pod Running on a real machine: p50 "
          f"{statistics.median(seconds):.1f} s, max {max(seconds):.1f} s of {PODS}")  # fmt: skip


def pool(env: Environment, cluster: str) -> None:
    template = get_json(env, f"{env.api_url}/v3/nodetemplates?name=machine")["data"][0]["id"]
    began = time.monotonic()
    created = send_json(env, "POST", f"{env.api_url}/v3/nodepools", {
        "clusterId": cluster, "hostnamePrefix": "bench", "quantity": POOL, "worker": True,
        "nodeTemplateName": template})  # fmt: skip
    wait_for(f"{POOL} pool machines Ready",
             lambda: all(ready(env, cluster, f"bench{i}") for i in range(1, POOL + 1)),
             TIMEOUT * 2)  # fmt: skip
    print(f"pool 0 -> {POOL} real machines: all Ready nodes after "
          f"{time.monotonic() - began:.1f} s")  # fmt: skip
    send_json(env, "DELETE", f"{env.api_url}/v3/nodepools/{created['id']}")


def main() -> None:
    options = {"real_nodes": 1, "hosted_control_planes": True, "real_clusters": 1,
               "netbins": ROOT / "tools/netbins"}  # fmt: skip
    with stack(0, **options) as env:
        print(f"stack with one k3s cluster and a real worker (make run's default) up in "
              f"{env.startup_seconds:.1f} s", flush=True)  # fmt: skip
        (cluster,) = env.real_cluster_ids
        pods(env, cluster)
        pool(env, cluster)
        joins(env, cluster)
