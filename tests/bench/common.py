"""What the benchmarks share: the machine line, memory readings, timed GETs, and lifting the
API's rate limit (a benchmark is not a user)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import ssl
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.environment import Environment, Options
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
# (label, a function giving the next URL, rounds)
Case = tuple[str, Callable[[], str], int]
# Requests per measurement by concurrent clients, after WARMUP requests.
REQUESTS = {1: 2000, 32: 6000}
WARMUP = 200


@contextlib.contextmanager
def stack(
    downstream_clusters: int, nodes_per_cluster: int = 3, **options: Any
) -> Iterator[Environment]:
    """The local stack as `make run` starts it, for a benchmark: devkube built, the machine
    printed, the rate limit lifted. `options` go to the environment (real nodes, …)."""
    subprocess.run([str(ROOT / "tools/devkube/build.sh")], check=True)
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        options = Options(
            Path(tmp),
            ROOT / "tools/devkube/bin/devkube",
            ROOT / "crds",
            downstream_clusters=downstream_clusters,
            nodes_per_cluster=nodes_per_cluster,
            api_port=0,
            **options,
        )
        with Environment(options) as env:
            lift_rate_limit(env)
            yield env


def report(env: Environment, cases: Sequence[Case]) -> None:
    """Time each case's GETs, print a table, then the resident memory of corral's processes."""

    async def measure() -> list[tuple[float, float, int]]:
        async with session(env) as client:
            return [await timings(client, url, rounds) for _, url, rounds in cases]

    print(f"{'case':<52} {'rounds':>6} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>10}")
    for (label, _, rounds), (p50, p99, size) in zip(cases, asyncio.run(measure()), strict=True):
        print(f"{label:<52} {rounds:>6} {p50:>8.1f} {p99:>8.1f} {size:>10}", flush=True)
    for process in env.corral:
        print(f"RSS {process.name}: {rss_mib(process):.0f} MiB")


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def rss_mib(process: Process) -> float:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(process: Process) -> float:
    """User and system time the process has used so far."""
    return _cpu_of(process.pid)


def tree_cpu_seconds(process: Process) -> float:
    """User and system time the process and its children (a supervisor's workers) have used
    so far."""
    children = [pid for pid in _pids() if _stat(pid)[1:2] == [str(process.pid)]]
    return sum(_cpu_of(pid) for pid in [process.pid, *children])


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command (state first), or none for a process
    gone meanwhile."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return []


def _cpu_of(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def get_json(env: Environment, url: str) -> dict[str, Any]:
    return send_json(env, "GET", url)


def send_json(env: Environment, method: str, url: str, body: Any = None) -> dict[str, Any]:
    """One request as the admin; the answer's JSON (an error status raises)."""
    headers = {"Authorization": f"Bearer {env.admin_token}"}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    request = urllib.request.Request(url, data, headers, method=method)
    context = ssl.create_default_context(cafile=str(env.ca_path))
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        answer = response.read()
        # A DELETE answers 204 with no body.
        result: dict[str, Any] = json.loads(answer) if answer else {}
        return result


def lift_rate_limit(env: Environment) -> None:
    """Set `api-rate-limit-per-minute` to 0 (no limit) and wait until the API applies it."""
    management = k8s_config.new_client_from_config(str(env.management_kubeconfig))
    k8s.CustomObjectsApi(management).patch_cluster_custom_object(
        "management.svc.io", "v3", "settings", "api-rate-limit-per-minute", {"value": "0"}
    )
    setting = f"{env.api_url}/v3/settings/api-rate-limit-per-minute"
    wait_for(
        "the API server to see the setting", lambda: get_json(env, setting)["value"] == "0", 10
    )


async def timings(
    session: aiohttp.ClientSession, urls: Callable[[], str], rounds: int
) -> tuple[float, float, int]:
    """p50 and p99 in milliseconds of `rounds` sequential GETs, and the last body's size."""
    latencies, size = [], 0
    for _ in range(rounds):
        began = time.perf_counter()
        async with session.get(urls()) as response:
            body = await response.read()
            assert response.status == 200, body[:200]
        latencies.append(time.perf_counter() - began)
        size = len(body)
    latencies.sort()
    p99 = latencies[max(int(len(latencies) * 0.99) - 1, 0)]
    return statistics.median(latencies) * 1000, p99 * 1000, size


Post = Callable[[aiohttp.ClientSession, str, dict[str, Any]], Awaitable[Any]]


def poster(env: Environment, concurrency: int) -> Post:
    """POSTs to the API, at most `concurrency` at once, each expected to answer 201."""
    limit = asyncio.Semaphore(concurrency)

    async def post(client: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> Any:
        async with limit, client.post(env.api_url + path, json=body) as response:
            found = await response.json()
            assert response.status == 201, found
            return found

    return post


def session(env: Environment) -> aiohttp.ClientSession:
    context = ssl.create_default_context(cafile=str(env.ca_path))
    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {env.admin_token}"},
        connector=aiohttp.TCPConnector(ssl=context),
    )


async def measure(
    url: str, headers: dict[str, str], context: ssl.SSLContext, concurrency: int, total: int
) -> tuple[float, float, float]:
    """Requests per second, p50 ms, p99 ms of `total` GETs by `concurrency` clients."""
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def worker(count: int, record: bool) -> None:
            for _ in range(count):
                began = time.perf_counter()
                async with session.get(url) as response:
                    await response.read()
                    assert response.status == 200, response.status
                if record:
                    latencies.append(time.perf_counter() - began)

        await asyncio.gather(
            *(worker(WARMUP // concurrency + 1, False) for _ in range(concurrency))
        )
        began = time.perf_counter()
        await asyncio.gather(*(worker(total // concurrency, True) for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000
