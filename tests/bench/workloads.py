"""1,000 Deployments (one pod each) in one project of a downstream cluster with ten kwok
nodes, made through /v3 as a client would: how long the creates take and until every one is
active, /v3 read latencies of the listing and of one workload, and the memory of the API
server afterwards (it keeps the cluster's workloads, pods, Services and Ingresses in its
caches)."""

from __future__ import annotations

import asyncio
import random
import time

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import Case, get_json, poster, report, session, stack

WORKLOADS = 1000
NAMESPACES = 10
NODES = 10
CONCURRENCY = 16


async def populate(env: Environment, cluster: str) -> tuple[str, list[str], float]:
    """A project, its namespaces, then the Deployments; their ids and how long those took."""
    post = poster(env, CONCURRENCY)

    async with session(env) as client:
        project = (await post(client, "/v3/projects", {"name": "bench", "clusterId": cluster}))[
            "id"
        ]
        namespaces = [f"bench-{n}" for n in range(NAMESPACES)]
        for namespace in namespaces:
            await post(
                client,
                f"/v3/clusters/{cluster}/namespaces",
                {"name": namespace, "projectId": project},
            )
        began = time.monotonic()
        created = await asyncio.gather(
            *(
                post(
                    client,
                    f"/v3/projects/{project}/workloads",
                    {
                        "name": f"web-{i:04d}",
                        "namespaceId": namespaces[i % NAMESPACES],
                        "containers": [
                            {
                                "name": "web",
                                "image": "example/web:1",
                                "ports": [{"containerPort": 8080}],
                            }
                        ],
                    },
                )
                for i in range(WORKLOADS)
            )
        )
        return project, [w["id"] for w in created], time.monotonic() - began


def active(env: Environment, project: str) -> int:
    listing = get_json(env, f"{env.api_url}/v3/projects/{project}/workloads?state=active")
    return int(listing["pagination"]["total"])


def cases(env: Environment, project: str, ids: list[str]) -> list[Case]:
    base = f"{env.api_url}/v3/projects/{project}"
    return [
        (f"GET workloads ({WORKLOADS}, one page)", lambda: f"{base}/workloads", 30),
        ("GET workloads?limit=50", lambda: f"{base}/workloads?limit=50", 200),
        (
            "GET workloads?namespaceId=bench-3 (100)",
            lambda: f"{base}/workloads?namespaceId=bench-3",
            100,
        ),
        ("GET workloads/{id}", lambda: f"{base}/workloads/{random.choice(ids)}", 300),  # noqa: S311 - sampling
        (f"GET pods ({WORKLOADS}, one page)", lambda: f"{base}/pods", 30),
    ]


def main() -> None:
    with stack(downstream_clusters=1, nodes_per_cluster=NODES) as env:
        project, ids, seconds = asyncio.run(populate(env, env.cluster_ids[0]))
        print(
            f"created {WORKLOADS} Deployments through /v3 in {seconds:.0f} s "
            f"({WORKLOADS / seconds:.0f}/s, {CONCURRENCY} at a time)"
        )
        began = time.monotonic()
        wait_for("every workload active", lambda: active(env, project) == WORKLOADS, 900)
        print(f"all {WORKLOADS} active {time.monotonic() - began:.0f} s after the last create")
        report(env, cases(env, project, ids))
