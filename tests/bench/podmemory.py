"""The API server's memory with many large pods in one cluster: `BENCH_PODS` pods (10,000 by
default) of about 100 KB each (the environment and arguments a user may give), made directly
in a project's namespaces on kwok nodes, then listed through /v3 (which starts the API
server's pod cache). corral keeps a cut copy of each pod (`core/workloads/pods.py`), so its
memory grows with the number of pods, not with their size."""

from __future__ import annotations

import concurrent.futures
import os
import time
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import get_json, rss_mib, send_json, stack

PODS = int(os.environ.get("BENCH_PODS", "10000"))
POD_BYTES = 100 * 1024
NAMESPACES = 10
# kwok nodes take 110 pods each.
NODES = PODS // 100 + 1
WRITERS = 16


def pod(name: str, node: str) -> dict[str, Any]:
    entries = POD_BYTES // 200
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "podmemory"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1",
                    "env": [{"name": f"E{i}", "value": "v" * 180} for i in range(entries)],
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                }
            ],
            "tolerations": [{"operator": "Exists"}],
        },
    }


def populate(env: Environment, namespaces: list[str]) -> float:
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.downstream_kubeconfigs()[0])))
    nodes = [n.metadata.name for n in core.list_node().items]
    began = time.monotonic()

    def create(i: int) -> None:
        core.create_namespaced_pod(
            namespaces[i % len(namespaces)], pod(f"big-{i}", nodes[i % len(nodes)])
        )

    with concurrent.futures.ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(create, range(PODS)))
    return time.monotonic() - began


def main() -> None:
    with stack(downstream_clusters=1, nodes_per_cluster=NODES) as env:
        cluster = env.cluster_ids[0]
        project = send_json(env, "POST", f"{env.api_url}/v3/projects",
                            {"name": "podmemory", "clusterId": cluster})["id"]  # fmt: skip
        namespaces = [f"podmemory-{n}" for n in range(NAMESPACES)]
        for namespace in namespaces:
            send_json(env, "POST", f"{env.api_url}/v3/clusters/{cluster}/namespaces",
                      {"name": namespace, "projectId": project})  # fmt: skip
        apiserver = next(p for p in env.corral if p.name == "apiserver")
        pods_url = f"{env.api_url}/v3/projects/{project}/pods?limit=1"
        get_json(env, pods_url)
        before = rss_mib(apiserver)
        seconds = populate(env, namespaces)
        print(f"made {PODS} pods of about {POD_BYTES // 1024} KB in {seconds:.0f} s "
              f"({PODS * POD_BYTES / 2**30:.2f} GiB of pods)")  # fmt: skip
        wait_for(
            "the API server's cache holds every pod",
            lambda: get_json(env, pods_url)["pagination"].get("total") == PODS,
            600,
        )
        began = time.perf_counter()
        get_json(env, f"{env.api_url}/v3/projects/{project}/pods?limit=50")
        print(f"GET pods?limit=50 of {PODS}: {(time.perf_counter() - began) * 1000:.0f} ms")
        after = rss_mib(apiserver)
        print(f"API server RSS: {before:.0f} MiB before, {after:.0f} MiB with {PODS} pods "
              f"({(after - before) * 1024 / PODS:.1f} KiB a pod)")  # fmt: skip
        for process in env.corral:
            print(f"RSS {process.name}: {rss_mib(process):.0f} MiB")
