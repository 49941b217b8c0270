"""1,000 clusters and 10,000 nodes (CRs created directly, with realistic node status) listed
through /v3; the operator's and the API server's resident memory once the operator has
reconciled every cluster."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from corral.core.kube import kinds
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import Case, get_json, report, stack

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
                kinds.Cluster(
                    metadata=ObjectMeta(name=name, labels={"bench": "true"}),
                    spec={"displayName": f"bench {index}", "driver": "imported"},
                )
            )
            await kube.apply(Namespace(metadata=ObjectMeta(name=name)), field_manager="bench")
            for n in range(NODES_PER_CLUSTER):
                node = f"node-{n}"
                cr = f"m-{index:04d}{n:02d}"
                await kube.create(
                    kinds.Node(
                        metadata=ObjectMeta(name=cr, namespace=name),
                        spec={"requestedHostname": node, "worker": True},
                    )
                )
                await kube.patch(
                    kinds.Node.Status,
                    cr,
                    {"status": node_status(node)},
                    namespace=name,
                    patch_type=PatchType.MERGE,
                )

    await asyncio.gather(*(one_cluster(i) for i in range(CLUSTERS)))
    return time.monotonic() - began


def cases(env: Environment) -> list[Case]:
    base = env.api_url
    ids = [f"c-bench{i:04d}" for i in range(CLUSTERS)]

    def pick(path: Callable[[str], str]) -> Callable[[], str]:
        return lambda: base + path(random.choice(ids))  # noqa: S311 - sampling, not security

    return [
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


def main() -> None:
    with stack(downstream_clusters=0) as env:
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
        report(env, cases(env))


def total(env: Environment, url: str) -> int:
    return int(get_json(env, url)["pagination"]["total"])


def reconciled(env: Environment) -> int:
    """Clusters whose status the operator has written (they carry a Pending condition)."""
    body = get_json(env, f"{env.api_url}/v3/clusters?limit=-1")
    return sum(1 for c in body["data"] if c["status"].get("conditions"))
