"""1,000 clusters and 10,000 nodes (CRs created directly, with realistic node status) listed
through /v3; the operator's and the API server's resident memory once the operator has
reconciled every cluster."""

from __future__ import annotations

import asyncio
import random
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from corral.core import resources
from corral.core.devenv.environment import Environment, Options
from corral.core.devenv.waiting import wait_for
from tests.bench.common import get_json, lift_rate_limit, machine, rss_mib, session, timings

ROOT = Path(__file__).resolve().parents[2]
CLUSTERS = 1000
NODES_PER_CLUSTER = 10
CONCURRENCY = 32


def node_status(name: str) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    return {
        "nodeName": name,
        "internalNodeStatus": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "capacity": capacity,
            "allocatable": capacity,
            "unschedulable": False,
        },
        "nodeLabels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        "conditions": [
            {"type": t, "status": "True", "reason": t}
            for t in ("Initialized", "Provisioned", "Registered", "Ready", "Updated")
        ],
    }


async def populate(kube: AsyncClient) -> float:
    began = time.monotonic()
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one_cluster(index: int) -> None:
        async with limit:
            name = f"c-bench{index:04d}"
            await kube.create(
                resources.Cluster(
                    metadata=ObjectMeta(name=name, labels={"bench": "true"}),
                    spec={"displayName": f"bench {index}", "driver": "imported"},
                )
            )
            await kube.apply(Namespace(metadata=ObjectMeta(name=name)), field_manager="bench")
            for n in range(NODES_PER_CLUSTER):
                node = f"node-{n}"
                cr = f"m-{index:04d}{n:02d}"
                await kube.create(
                    resources.Node(
                        metadata=ObjectMeta(name=cr, namespace=name),
                        spec={"requestedHostname": node, "worker": True},
                    )
                )
                await kube.patch(
                    resources.Node.Status,
                    cr,
                    {"status": node_status(node)},
                    namespace=name,
                    patch_type=PatchType.MERGE,
                )

    await asyncio.gather(*(one_cluster(i) for i in range(CLUSTERS)))
    return time.monotonic() - began


async def measure(env: Environment) -> list[tuple[str, int, tuple[float, float, int]]]:
    base = env.api_url
    ids = [f"c-bench{i:04d}" for i in range(CLUSTERS)]

    def pick(path: Callable[[str], str]) -> Callable[[], str]:
        return lambda: base + path(random.choice(ids))  # noqa: S311 - sampling, not security

    cases: list[tuple[str, Callable[[], str], int]] = [
        ("GET /v3/clusters (1,001 clusters, one page)", lambda: f"{base}/v3/clusters", 30),
        ("GET /v3/clusters?limit=50", lambda: f"{base}/v3/clusters?limit=50", 200),
        (
            "GET /v3/clusters?labelSelector=bench%3Dtrue",
            lambda: f"{base}/v3/clusters?labelSelector=bench%3Dtrue",
            30,
        ),
        ("GET /v3/clusters/{id}", pick(lambda c: f"/v3/clusters/{c}"), 500),
        ("GET /v3/clusters/{id}/nodes (10 nodes)", pick(lambda c: f"/v3/clusters/{c}/nodes"), 500),
        (
            "GET /v3/clusters/{id}/nodes/{node}",
            pick(lambda c: f"/v3/clusters/{c}/nodes/{c}:m-{c[-4:]}05"),
            500,
        ),
    ]
    async with session(env) as client:
        return [(label, rounds, await timings(client, url, rounds)) for label, url, rounds in cases]


def main() -> None:
    subprocess.run([str(ROOT / "tools/devkube/build.sh")], check=True)
    print(f"machine: {machine()}")
    with (
        tempfile.TemporaryDirectory() as tmp,
        Environment(
            Options(
                Path(tmp),
                ROOT / "tools/devkube/bin/devkube",
                ROOT / "crds",
                downstream_clusters=0,
                api_port=0,
            )
        ) as env,
    ):
        lift_rate_limit(env)
        kube = AsyncClient(KubeConfig.from_file(env.management_kubeconfig), field_manager="bench")
        seconds = asyncio.run(populate(kube))
        print(
            f"created {CLUSTERS} clusters and {CLUSTERS * NODES_PER_CLUSTER} nodes "
            f"(with status) in {seconds:.0f} s"
        )
        cluster_list = f"{env.api_url}/v3/clusters?limit=1"
        wait_for("the API server's caches", lambda: total(env, cluster_list) == CLUSTERS + 1, 120)
        began = time.monotonic()
        wait_for(
            "the operator to reconcile every cluster", lambda: reconciled(env) >= CLUSTERS, 900
        )
        print(
            f"operator reconciled all clusters {time.monotonic() - began:.0f} s after the API "
            "server had them"
        )
        print(f"{'case':<52} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>10}")
        for label, rounds, (p50, p99, size) in asyncio.run(measure(env)):
            print(f"{label:<52} {rounds:>6} {p50:>8.1f} {p99:>8.1f} {size:>10}", flush=True)
        for process in env.corral:
            print(f"RSS {process.name}: {rss_mib(process):.0f} MiB")


def total(env: Environment, url: str) -> int:
    return int(get_json(env, url)["pagination"]["total"])


def reconciled(env: Environment) -> int:
    """Clusters whose status the operator has written (they carry a Pending condition)."""
    body = get_json(env, f"{env.api_url}/v3/clusters?limit=-1")
    return sum(1 for c in body["data"] if c["status"].get("conditions"))
