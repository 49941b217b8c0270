"""Pages of a long workload listing, timed in-process: the CPU one page costs the API server,
which other work on the machine does not change as it changes a wall-clock figure.

The application is served in-process (as in the contract tier) against a management plane of
etcd and kube-apiserver alone; 10,000 Deployments of no replicas are written into `local`
through kube-apiserver, spread over ten namespaces of one project. Each case's pages are asked
one at a time through aiohttp's test client; its figures are the process's CPU time per page
(client included: a constant fraction of a millisecond), the wall time, and the collector's
full collections and longest pause during the case. A profile of the
first-time pages (`BENCH_PAGES_PROFILE=<file>`) is written for `python -m pstats`.
`BENCH_PAGES_WORKLOADS` sets how many workloads (10,000)."""

from __future__ import annotations

import asyncio
import cProfile
import gc
import os
import random
import secrets
import ssl
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp.test_utils import TestClient, TestServer
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment

from corral.apiserver.app import create_app
from corral.core.api import ids, names
from corral.core.auth import hashing
from corral.core.features import parse as parse_features
from corral.core.kube import client as kube_client
from corral.core.kube import kinds
from corral.core.pki import CertificateAuthority
from corral.devenv.environment import Environment, Options
from corral.operator.management import bootstrap
from tests.bench.common import ROOT, machine

WORKLOADS = int(os.environ.get("BENCH_PAGES_WORKLOADS", "10000"))
NAMESPACES = 10
CONCURRENCY = 32
EXTERNAL_URL = "https://corral.bench.test"


async def admin_token(kube: AsyncClient) -> str:
    """The bootstrapped administrator's API token, stored as the API server stores one."""
    key, name = hashing.new_key(), ids.generate("token")
    labels = {names.LABEL_TOKEN_USER: bootstrap.ADMIN_ID,
              names.INDEX_TOKEN_KEY: hashing.index_digest(key)}  # fmt: skip
    principal = {"name": f"local://{bootstrap.ADMIN_ID}"}
    spec = {"token": hashing.hash_key(key), "ttlMillis": 0, "description": "bench",
            "userId": bootstrap.ADMIN_ID, "authProvider": "local", "isDerived": True,
            "clusterName": "", "userPrincipal": principal}  # fmt: skip
    metadata = ObjectMeta(name=name, labels=labels,
                          annotations={names.ANNOTATION_TOKEN_HASHED: "true"})  # fmt: skip
    await kube.create(kinds.Token(metadata=metadata, spec=spec))
    return f"{name}:{key}"


def serving_tls(directory: Path) -> ssl.SSLContext:
    ca = CertificateAuthority.create("bench-ca")
    cert, key = ca.issue_server("corral", ["corral.bench.test"]).write(directory, "serving")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    return tls


async def until(what: str, probe: Callable[[], Any], within: float) -> None:
    ends = time.monotonic() + within
    while not await probe():
        if time.monotonic() > ends:
            raise TimeoutError(what)
        await asyncio.sleep(0.2)


async def write_workloads(
    kube: AsyncClient, client: TestClient[Any, Any], auth: dict[str, str]
) -> tuple[str, list[str]]:
    """The project, its namespaces through /v3, then the Deployments; the project's id and the
    workloads' ids."""

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with client.post(path, json=body, headers=auth) as answer:
            found: dict[str, Any] = await answer.json()
            assert answer.status == 201, found
            return found

    project = (await post("/v3/projects", {"name": "pages", "clusterId": "local"}))["id"]
    spaces = [f"pages-{secrets.token_hex(3)}-{n}" for n in range(NAMESPACES)]
    for space in spaces:
        await post("/v3/clusters/local/namespaces", {"name": space, "projectId": project})
    limit = asyncio.Semaphore(CONCURRENCY)

    async def deployment(index: int) -> None:
        labels = {"app": f"w{index:05d}"}
        obj = Deployment.from_dict({
            "metadata": {"name": f"w{index:05d}", "namespace": spaces[index % NAMESPACES]},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web",
                                                           "image": "example/web:1"}]}}},
        })  # fmt: skip
        async with limit:
            await kube.create(obj)

    await asyncio.gather(*(deployment(i) for i in range(WORKLOADS)))
    return str(project), [f"deployment:{spaces[i % NAMESPACES]}:w{i:05d}" for i in range(WORKLOADS)]


class Collections:
    """The garbage collector's pauses while counting: how many of the oldest generation's
    collections (which walk every object not frozen), and the longest of any generation."""

    def __init__(self) -> None:
        self.full = 0
        self.longest = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        self.longest = max(self.longest, time.perf_counter() - self._began)
        self.full += info["generation"] == 2

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def timed(
    client: TestClient[Any, Any], auth: dict[str, str], urls: Callable[[], str], rounds: int
) -> tuple[list[float], list[float]]:
    """CPU and wall seconds of each of `rounds` GETs, one at a time."""
    cpu, wall = [], []
    for _ in range(rounds):
        began, began_cpu = time.perf_counter(), time.process_time()
        async with client.get(urls(), headers=auth) as answer:
            body = await answer.read()
            assert answer.status == 200, body[:200]
        cpu.append(time.process_time() - began_cpu)
        wall.append(time.perf_counter() - began)
    return cpu, wall


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(int(len(ordered) * 0.99) - 1, 0)]


async def measure(env: Environment, tls: ssl.SSLContext) -> None:
    os.environ["KUBECONFIG"] = str(env.management_kubeconfig)
    os.environ["CORRAL_BOOTSTRAP_PASSWORD"] = secrets.token_urlsafe(18)
    kube = kube_client.async_client()
    await bootstrap.run(kube)
    await kube.apply(kinds.Setting(metadata=ObjectMeta(name="api-rate-limit-per-minute"),
                                   value="0"), field_manager="bench", force=True)  # fmt: skip
    auth = {"Authorization": f"Bearer {await admin_token(kube)}"}
    app = create_app(kube_client.async_client(), parse_features(""), EXTERNAL_URL, tls=tls)
    async with TestClient(TestServer(app)) as client:

        async def answers(path: str, check: Callable[[Any], bool]) -> bool:
            async with client.get(path, headers=auth) as answer:
                return answer.status == 200 and check(await answer.json())

        await until("the API server to know the admin's token",
                    lambda: answers("/v3/users", lambda body: True), 60)  # fmt: skip
        began = time.monotonic()
        project, ids_ = await write_workloads(kube, client, auth)
        print(f"wrote {WORKLOADS:,} Deployments in {time.monotonic() - began:.0f} s", flush=True)
        base = f"/v3/projects/{project}/workloads"
        await until("every workload listed", lambda: answers(
            f"{base}?limit=1", lambda body: body["pagination"]["total"] == WORKLOADS),
            600)  # fmt: skip
        space = ids_[0].split(":")[1]
        # Pages that share no workload, none asked before: each renders its 50 afresh.
        firsts = sorted(ids_)[::50]
        random.shuffle(firsts)
        firsts_left = iter(firsts)

        def first_time() -> str:
            return f"{base}?limit=50&marker={quote(next(firsts_left))}"

        def anywhere() -> str:
            return f"{base}?limit=50&marker={quote(random.choice(ids_))}"  # noqa: S311

        cases: list[tuple[str, Callable[[], str], int]] = [
            ("?limit=50&marker=<a page not asked before>", first_time, len(firsts)),
            ("?limit=50", lambda: f"{base}?limit=50", 300),
            ("?limit=50&marker=<a random one>", anywhere, 300),
            ("?limit=50&namespaceId=<one>", lambda: f"{base}?limit=50&namespaceId={space}", 100),
            ("?limit=50&sort=name", lambda: f"{base}?limit=50&sort=name", 100),
            ("?limit=50&state=updating", lambda: f"{base}?limit=50&state=updating", 30),
            ("?limit=50&state_ne=active&sort=state",
             lambda: f"{base}?limit=50&state_ne=active&sort=state", 30),
        ]  # fmt: skip
        print(
            f"{'case':<46} {'rounds':>6} {'cpu p50':>8} {'cpu p99':>8} {'wall p50':>9} "
            f"{'wall p99':>9} {'gen-2':>5} {'gc max':>8}  (ms; gen-2: full collections)"
        )
        profile = os.environ.get("BENCH_PAGES_PROFILE")
        for label, urls, rounds in cases:
            profiler = cProfile.Profile() if profile and urls is first_time else None
            if profiler is not None:
                profiler.enable()
            with Collections() as collections:
                cpu, wall = await timed(client, auth, urls, rounds)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
            print(f"{label:<46} {rounds:>6} {statistics.median(cpu) * 1000:>8.2f} "
                  f"{p99(cpu) * 1000:>8.2f} {statistics.median(wall) * 1000:>9.2f} "
                  f"{p99(wall) * 1000:>9.2f} {collections.full:>5} "
                  f"{collections.longest * 1000:>8.1f}", flush=True)  # fmt: skip
        print(f"RSS of this process (the API server and the client): "
              f"{rss_mib_self():.0f} MiB, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    await kube.close()


def rss_mib_self() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    print(f"machine: {machine()}, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        options = Options(root=Path(tmp), devkube=ROOT / "tools/devkube/bin/devkube",
                          crds=ROOT / "crds", downstream_clusters=0, start_corral=False,
                          controllers=False)  # fmt: skip
        with Environment(options) as env:
            asyncio.run(measure(env, serving_tls(Path(tmp))))
