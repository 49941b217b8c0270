"""How soon a change shows: projects created one after another through /v3 on an idle stack,
timed from the POST until the API reports all four conditions true (`state: active`), and
namespaces created into a project with a quota, timed from the POST until the namespace's
ResourceQuota exists downstream. Conditions should move on events, not on a timer."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from tests.bench.common import session, stack

ROUNDS = 20
POLL = 0.02  # seconds between looks: the figures are good to about this much
GIVE_UP = 60.0
QUOTA = {
    "resourceQuota": {"limit": {"pods": "100"}},
    "namespaceDefaultResourceQuota": {"limit": {"pods": "10"}},
}
QUOTA_NAME = "corral-project-quota"


async def seconds_until(check: Callable[[], Awaitable[bool]]) -> float:
    began = time.monotonic()
    while not await check():
        if time.monotonic() - began > GIVE_UP:
            raise TimeoutError("gave up waiting")
        await asyncio.sleep(POLL)
    return time.monotonic() - began


async def post(client: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Any:
    async with client.post(url, json=body) as response:
        found = await response.json()
        assert response.status == 201, found
        return found


def summary(label: str, values: list[float]) -> None:
    ordered = sorted(values)
    p99 = ordered[max(int(len(ordered) * 0.99) - 1, 0)]
    print(f"{label:<52} {len(values):>6} {statistics.median(values):>8.2f} {p99:>8.2f} "
          f"{ordered[-1]:>8.2f}", flush=True)  # fmt: skip


def main() -> None:
    with stack(downstream_clusters=1) as env:
        cluster = env.cluster_ids[0]
        downstream = k8s.CoreV1Api(
            k8s_config.new_client_from_config(str(env.downstream_kubeconfigs()[0]))
        )

        async def measure() -> tuple[list[float], list[float]]:
            projects, quotas = [], []
            async with session(env) as client:
                for i in range(ROUNDS):
                    began = time.monotonic()
                    body = {"name": f"ready {i}", "clusterId": cluster, **QUOTA}
                    project = await post(client, f"{env.api_url}/v3/projects", body)
                    url = f"{env.api_url}/v3/projects/{project['id']}"

                    async def active(url: str = url) -> bool:
                        async with client.get(url) as response:
                            return bool((await response.json()).get("state") == "active")

                    await seconds_until(active)
                    projects.append(time.monotonic() - began)

                    began = time.monotonic()
                    namespace = f"ready-{i}-{int(time.time())}"
                    await post(client, f"{env.api_url}/v3/clusters/{cluster}/namespaces",
                               {"name": namespace, "projectId": project["id"]})  # fmt: skip

                    async def landed(namespace: str = namespace) -> bool:
                        found = await asyncio.to_thread(
                            downstream.list_namespaced_resource_quota, namespace
                        )
                        return any(q.metadata.name == QUOTA_NAME for q in found.items)

                    await seconds_until(landed)
                    quotas.append(time.monotonic() - began)
            return projects, quotas

        projects, quotas = asyncio.run(measure())
        print(f"{'case (seconds)':<52} {'rounds':>6} {'p50':>8} {'p99':>8} {'max':>8}")
        summary("POST /v3/projects -> all four conditions True", projects)
        summary("POST namespace -> its ResourceQuota downstream", quotas)
