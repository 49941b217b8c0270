"""Many tokens, many objects (issue 25, item 6): 100,000 tokens of 1,000 users, then 10,000
workloads in one project.

The users are created through the management cluster's API; their tokens, made as the API
server makes them (the key hashed, its digest in the key index), are put into its etcd
as kube-apiserver stores them (creating 100,000 through kube-apiserver one
at a time took half an hour and more on a loaded machine); kube-apiserver's watch and so the
API server's caches read them as any other write. Then authentication with a random one of the
100,000 tokens per request, a user's `GET /v3/tokens` (its 100), and the API server's memory
before and after. The workloads are Deployments of no replicas written
straight into the downstream cluster (as kubectl would; the workloads bench times creates
through /v3), spread over ten namespaces of the project, then listed 50 at a time.

`BENCH_MANY=tokens` or `BENCH_MANY=workloads` runs one part alone, at the same sizes."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import random
import ssl
import statistics
import time
import urllib.error
import urllib.request
import uuid
from urllib.parse import quote

import aiohttp
import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment

from corral.core.api import names
from corral.core.auth import hashing
from corral.core.kube import kinds
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import get_json, poster, report, rss_mib, session, stack

USERS = 1000
TOKENS_PER_USER = 100
WORKLOADS = 10_000
NAMESPACES = 10
CONCURRENCY = 32
# Authenticated GETs timed, each with a token picked at random.
AUTH_ROUNDS = 3000
# The writes' timeout: with other runs on the machine a connection alone can take seconds.
WRITES_TIMEOUT = httpx2.Timeout(120)
PARTS = ("tokens", "workloads")
# Where kube-apiserver keeps Tokens in the etcd the local planes share (each plane its prefix).
TOKENS_PREFIX = f"/clusters/management/registry/{names.GROUP}/{names.TOKEN.plural}"
# Puts at once. One put per token: objects written in one transaction would share a
# resourceVersion, which kube-apiserver never gives two objects, and a watch resumed at it
# would miss the rest of them.
ETCD_CONCURRENCY = 16


async def write_tokens(env: Environment, kube: AsyncClient) -> dict[str, list[str]]:
    """The users, created through the management cluster's API, then their tokens put into
    its etcd as kube-apiserver stores a Token (hashed keys, the key index label):
    kube-apiserver's watch reads them from etcd as it reads its own writes, and the API
    server's caches from it. Every user's `<name>:<key>` values."""
    limit = asyncio.Semaphore(CONCURRENCY)

    async def user(index: int) -> None:
        user_id = f"u-bench{index:04d}"
        spec = {"username": f"bench-{index:04d}", "displayName": f"bench {index}", "enabled": True}
        async with limit:
            await kube.create(kinds.User(metadata=ObjectMeta(name=user_id), spec=spec))

    await asyncio.gather(*(user(i) for i in range(USERS)))
    values: dict[str, list[str]] = {}
    stored: list[tuple[str, bytes]] = []
    created = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for index in range(USERS):
        user_id = f"u-bench{index:04d}"
        values[user_id] = []
        for n in range(TOKENS_PER_USER):
            key, name = hashing.new_key(), f"token-{user_id[2:]}-{n:03d}"
            values[user_id].append(f"{name}:{key}")
            stored.append((f"{TOKENS_PREFIX}/{name}", token_object(name, key, user_id, created)))
    assert env.etcd is not None
    url = f"{env.etcd.url}/v3/kv/put"
    async with aiohttp.ClientSession() as client:
        writes = asyncio.Semaphore(ETCD_CONCURRENCY)

        async def put(key: str, value: bytes) -> None:
            body = {"key": _b64(key.encode()), "value": _b64(value)}
            async with writes, client.post(url, json=body) as response:
                assert response.status == 200, await response.text()

        await asyncio.gather(*(put(key, value) for key, value in stored[:-1]))
        # Last, on its own: a watch delivers in order, so a server that knows it knows all.
        await put(*stored[-1])
    return values


def token_object(name: str, key: str, user_id: str, created: str) -> bytes:
    """A Token as kube-apiserver keeps it in etcd (JSON; its resourceVersion is the etcd
    revision), made as the API server makes one: the key hashed, its digest in the index."""
    return json.dumps({
        "apiVersion": names.API_VERSION, "kind": "Token",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "generation": 1,
                     "creationTimestamp": created,
                     "labels": {names.LABEL_TOKEN_USER: user_id,
                                names.INDEX_TOKEN_KEY: hashing.index_digest(key)},
                     "annotations": {names.ANNOTATION_TOKEN_HASHED: "true"}},
        "spec": {"token": hashing.hash_key(key), "ttlMillis": 0, "description": "bench",
                 "userId": user_id, "authProvider": "local", "isDerived": True,
                 "clusterName": "", "enabled": True,
                 "userPrincipal": {"name": f"local://{user_id}"}},
    }).encode()  # fmt: skip


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def timed(env: Environment, requests: list[tuple[str, str]]) -> tuple[float, float, float]:
    """p50, p99 and max in milliseconds of sequential GETs, each `(path, token)`."""
    context = ssl.create_default_context(cafile=str(env.ca_path))
    latencies = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as client:
        for path, token in requests:
            began = time.perf_counter()
            headers = {"Authorization": f"Bearer {token}"}
            async with client.get(env.api_url + path, headers=headers) as response:
                body = await response.read()
                assert response.status == 200, body[:200]
            latencies.append(time.perf_counter() - began)
    latencies.sort()
    p99 = latencies[max(int(len(latencies) * 0.99) - 1, 0)]
    return statistics.median(latencies) * 1000, p99 * 1000, latencies[-1] * 1000


def known(env: Environment, token: str) -> bool:
    """Whether a token authenticates yet (the API server's caches have it)."""
    url = f"{env.api_url}/v3/tokens/{token.split(':')[0]}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=str(env.ca_path))
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError:
        return False


def api_rss(env: Environment) -> float:
    return sum(rss_mib(p) for p in env.corral if p.name.startswith("apiserver"))


def tokens_cases(env: Environment, values: dict[str, list[str]]) -> None:
    everyone = [v for tokens in values.values() for v in tokens]
    random.shuffle(everyone)
    own = [(f"/v3/tokens/{v.split(':')[0]}", v) for v in everyone[:AUTH_ROUNDS]]
    one_user = next(iter(values.values()))
    lists = [("/v3/tokens", random.choice(one_user)) for _ in range(500)]  # noqa: S311 - sampling
    for label, requests in (
        (f"GET /v3/tokens/{{id}}, a random token of {len(everyone):,}", own),
        (f"the same again ({AUTH_ROUNDS:,} tokens seen once)", own),
        (f"GET /v3/tokens (a user's {TOKENS_PER_USER})", lists),
    ):
        p50, p99, worst = asyncio.run(timed(env, requests))
        print(f"{label:<60} {len(requests):>6} p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  "
              f"max {worst:6.1f} ms", flush=True)  # fmt: skip


async def write_workloads(env: Environment) -> str:
    """The project, its namespaces through /v3, then the Deployments in the downstream
    cluster; the project's id."""
    post = poster(env, CONCURRENCY)
    cluster = env.cluster_ids[0]
    async with session(env) as client:
        project = await post(client, "/v3/projects", {"name": "many", "clusterId": cluster})
        spaces = [f"many-{n}" for n in range(NAMESPACES)]
        for space in spaces:
            await post(client, f"/v3/clusters/{cluster}/namespaces",
                       {"name": space, "projectId": project["id"]})  # fmt: skip
    config = KubeConfig.from_file(env.downstreams[0].kubeconfig_path)
    downstream = AsyncClient(config, timeout=WRITES_TIMEOUT)
    limit = asyncio.Semaphore(CONCURRENCY)

    async def deployment(index: int) -> None:
        labels = {"app": f"w{index:05d}"}
        spec = {"replicas": 0, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                             "spec": {"containers": [{"name": "web",
                                                      "image": "example/web:1"}]}}}  # fmt: skip
        obj = Deployment.from_dict({
            "metadata": {"name": f"w{index:05d}", "namespace": spaces[index % NAMESPACES]},
            "spec": spec,
        })  # fmt: skip
        async with limit:
            await downstream.create(obj)

    await asyncio.gather(*(deployment(i) for i in range(WORKLOADS)))
    await downstream.close()
    return str(project["id"])


def listed(env: Environment, project: str) -> int:
    body = get_json(env, f"{env.api_url}/v3/projects/{project}/workloads?limit=1")
    return int(body["pagination"].get("total", 0))


def main() -> None:
    parts = os.environ.get("BENCH_MANY", ",".join(PARTS)).split(",")
    if unknown := set(parts) - set(PARTS):
        raise SystemExit(f"BENCH_MANY: no part {', '.join(sorted(unknown))} ({', '.join(PARTS)})")
    with stack(downstream_clusters=1, nodes_per_cluster=3) as env:
        print(f"API server RSS at start: {api_rss(env):.0f} MiB")
        if "tokens" in parts:
            tokens_part(env)
        if "workloads" in parts:
            workloads_part(env)


def tokens_part(env: Environment) -> None:
    kube = AsyncClient(KubeConfig.from_file(env.management_kubeconfig), field_manager="bench",
                       timeout=WRITES_TIMEOUT)  # fmt: skip
    began = time.monotonic()
    values = asyncio.run(write_tokens(env, kube))
    count = USERS * TOKENS_PER_USER
    print(f"wrote {USERS:,} users and {count:,} tokens in {time.monotonic() - began:.0f} s")
    last = next(reversed(values.values()))[-1]
    wait_for("the API server to know the last token", lambda: known(env, last), 300)
    print(f"API server RSS with {count:,} tokens: {api_rss(env):.0f} MiB")
    tokens_cases(env, values)


def workloads_part(env: Environment) -> None:
    began = time.monotonic()
    project = asyncio.run(write_workloads(env))
    print(f"wrote {WORKLOADS:,} Deployments in {time.monotonic() - began:.0f} s")
    began = time.monotonic()
    wait_for("the API server to list every workload",
             lambda: listed(env, project) == WORKLOADS, 600)  # fmt: skip
    print(f"all listed {time.monotonic() - began:.0f} s after the last create")
    base = f"{env.api_url}/v3/projects/{project}/workloads"
    ids = [f"deployment:many-{i % NAMESPACES}:w{i:05d}" for i in range(WORKLOADS)]

    def anywhere() -> str:
        return f"{base}?limit=50&marker={quote(random.choice(ids))}"  # noqa: S311 - sampling

    report(env, [
        ("GET workloads?limit=50 (10,000 in the project)", lambda: f"{base}?limit=50", 300),
        ("GET workloads?limit=50&marker=<a random one>", anywhere, 300),
        ("GET workloads?limit=50&namespaceId=many-3",
         lambda: f"{base}?limit=50&namespaceId=many-3", 100),
        ("GET workloads?limit=50&sort=name", lambda: f"{base}?limit=50&sort=name", 30),
    ])  # fmt: skip
    print(f"API server RSS with the workloads too: {api_rss(env):.0f} MiB")
