"""What the benchmarks share: the machine line, memory readings, timed GETs, and lifting the
API's rate limit (a benchmark is not a user)."""

from __future__ import annotations

import json
import os
import platform
import ssl
import statistics
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.devenv.environment import Environment
from corral.core.devenv.process import Process
from corral.core.devenv.waiting import wait_for


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def rss_mib(process: Process) -> float:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def get_json(env: Environment, url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {env.admin_token}"})
    context = ssl.create_default_context(cafile=str(env.ca_path))
    with urllib.request.urlopen(request, timeout=60, context=context) as response:
        result: dict[str, Any] = json.loads(response.read())
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


def session(env: Environment) -> aiohttp.ClientSession:
    context = ssl.create_default_context(cafile=str(env.ca_path))
    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {env.admin_token}"},
        connector=aiohttp.TCPConnector(ssl=context),
    )
