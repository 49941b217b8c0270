"""What the rate limit held across replicas costs: an authenticated GET with the limit off and
with a limit high enough that it never refuses (each API server then reserves a tenth of it at
a time), one reservation (a conditional write of the user's ConfigMap) against the management
cluster, and how many reservations a user makes per request when they use their whole limit."""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from lightkube import AsyncClient, KubeConfig

from corral.apiserver.auth.ledger import KubeLedger
from corral.apiserver.auth.ratelimit import reservation, window_of
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import REQUESTS, get_json, measure, stack

RESERVATIONS = 300
HIGH_LIMIT = 1_000_000


def set_limit(env: Environment, value: int) -> None:
    management = k8s_config.new_client_from_config(str(env.management_kubeconfig))
    k8s.CustomObjectsApi(management).patch_cluster_custom_object(
        "management.svc.io", "v3", "settings", "api-rate-limit-per-minute", {"value": str(value)}
    )
    setting = f"{env.api_url}/v3/settings/api-rate-limit-per-minute"
    wait_for("the limit seen", lambda: get_json(env, setting)["value"] == str(value), 10)


async def reservation_latencies(env: Environment) -> list[float]:
    """Milliseconds of each of RESERVATIONS reservations of one user, one after another: each
    is one conditional PATCH on what the ledger last wrote (the first also a GET and a
    create)."""
    kube = AsyncClient(KubeConfig.from_file(str(env.management_kubeconfig)))
    ledger = KubeLedger(kube, lambda user: None)
    latencies = []
    first = window_of(time.time())
    try:
        for i in range(RESERVATIONS):
            began = time.perf_counter()
            # A window of its own for each: every call reserves, so writes.
            grant = await ledger.reserve("u-bench", first + i, 100)
            assert grant.granted == 10, grant
            latencies.append((time.perf_counter() - began) * 1000)
    finally:
        await kube.close()
    return latencies[1:]


def writes_per_full_window(limit: int) -> int:
    """Reservations a user makes to use the whole `limit` on one replica."""
    used = writes = 0
    while (granted := reservation(limit, used)) > 0:
        used, writes = used + granted, writes + 1
    return writes


def main() -> None:
    with stack(downstream_clusters=0) as env:
        token_name = env.admin_token.split(":")[0]
        url = f"{env.api_url}/v3/token/{token_name}"
        headers = {"Authorization": f"Bearer {env.admin_token}"}
        tls = ssl.create_default_context(cafile=str(env.ca_path))
        print(f"{'authenticated GET /v3/token/{id}':<45} {'clients':>7} {'req/s':>8} "
              f"{'p50 ms':>7} {'p99 ms':>7}")  # fmt: skip
        for label, limit in (("rate limit off (0)", 0), (f"limit {HIGH_LIMIT:,}", HIGH_LIMIT)):
            set_limit(env, limit)
            for concurrency, total in REQUESTS.items():
                rps, p50, p99 = asyncio.run(measure(url, headers, tls, concurrency, total))
                print(f"{label:<45} {concurrency:>7} {rps:>8.0f} {p50:>7.2f} {p99:>7.2f}",
                      flush=True)  # fmt: skip
        latencies = sorted(asyncio.run(reservation_latencies(env)))
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        print(f"one reservation (conditional PATCH of the ConfigMap), {len(latencies)} rounds: "
              f"p50 {statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms")  # fmt: skip
        for limit in (100, 1000, 100_000):
            writes = writes_per_full_window(limit)
            print(f"limit {limit:>7,}: {writes} reservations to use it all on one replica "
                  f"({writes / limit:.3f} per request)")  # fmt: skip
