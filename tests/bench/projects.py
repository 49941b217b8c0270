"""1,000 projects and 5,000 namespaces in one downstream cluster, all made through /v3 as a
client would: how long until every project has all its conditions true (each namespace gets a
ResourceQuota, a LimitRange and its creator's RoleBinding downstream), /v3 read latencies, and
the resident memory of the operator and the API server."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import Case, get_json, poster, report, session, stack

PROJECTS = 1000
NAMESPACES_PER_PROJECT = 5
CONCURRENCY = 16
QUOTA = {
    "resourceQuota": {"limit": {"limitsCpu": "10", "limitsMemory": "10Gi", "pods": "100"}},
    "namespaceDefaultResourceQuota": {
        "limit": {"limitsCpu": "2", "limitsMemory": "2Gi", "pods": "20"}
    },
    "containerDefaultResourceLimit": {"limitsCpu": "100m", "limitsMemory": "64Mi"},
}
CONDITIONS = (
    "BackingNamespaceCreated",
    "CreatorMadeOwner",
    "DefaultNetworkPolicyCreated",
    "InitialRolesPopulated",
)


async def populate(env: Environment, cluster: str) -> tuple[list[str], float, float]:
    """Creates the projects, then their namespaces; returns ids and both durations."""
    post = poster(env, CONCURRENCY)

    async with session(env) as client:
        began = time.monotonic()
        created = await asyncio.gather(
            *(
                post(client, "/v3/projects", {"name": f"bench {i}", "clusterId": cluster, **QUOTA})
                for i in range(PROJECTS)
            )
        )
        projects = [p["id"] for p in created]
        projects_seconds = time.monotonic() - began
        began = time.monotonic()
        await asyncio.gather(
            *(
                post(
                    client,
                    f"/v3/clusters/{cluster}/namespaces",
                    {"name": f"bench-{i:04d}-{n}", "projectId": project},
                )
                for i, project in enumerate(projects)
                for n in range(NAMESPACES_PER_PROJECT)
            )
        )
        return projects, projects_seconds, time.monotonic() - began


def settled(env: Environment, projects: set[str]) -> int:
    """How many of `projects` have every condition true."""
    listing = get_json(env, f"{env.api_url}/v3/projects?limit=-1")["data"]
    done = 0
    for project in listing:
        found = {c["type"]: c["status"] for c in project["status"].get("conditions", [])}
        if project["id"] in projects and all(found.get(t) == "True" for t in CONDITIONS):
            done += 1
    return done


def cases(env: Environment, cluster: str, projects: list[str]) -> list[Case]:
    base = env.api_url

    def pick(path: str) -> Any:
        return lambda: base + path.format(random.choice(projects))  # noqa: S311 - sampling

    return [
        ("GET /v3/projects (1,002 projects, one page)", lambda: f"{base}/v3/projects", 30),
        ("GET /v3/projects?limit=50", lambda: f"{base}/v3/projects?limit=50", 200),
        (
            f"GET /v3/projects?clusterId={cluster}",
            lambda: f"{base}/v3/projects?clusterId={cluster}",
            30,
        ),
        ("GET /v3/projects/{id}", pick("/v3/projects/{}"), 300),
        (
            "GET /v3/clusters/{c}/namespaces?projectId= (5)",
            pick(f"/v3/clusters/{cluster}/namespaces?projectId={{}}"),
            300,
        ),
        ("GET /v3/projects/{id}?include=usage", pick("/v3/projects/{}?include=usage"), 100),
    ]


def main() -> None:
    with stack(downstream_clusters=1) as env:
        cluster = env.cluster_ids[0]
        began = time.monotonic()
        projects, project_s, namespace_s = asyncio.run(populate(env, cluster))
        print(
            f"created {PROJECTS} projects through /v3 in {project_s:.0f} s, then "
            f"{PROJECTS * NAMESPACES_PER_PROJECT} namespaces in {namespace_s:.0f} s"
        )
        wanted = set(projects)
        wait_for("every project settled", lambda: settled(env, wanted) == len(wanted), 1800)
        total = time.monotonic() - began
        print(
            f"all {PROJECTS} projects had every condition true {total:.0f} s after the first "
            f"request ({total - project_s - namespace_s:.0f} s after the last)"
        )
        report(env, cases(env, cluster, projects))
