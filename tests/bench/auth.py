"""What authentication costs: authenticated `GET /v3/token/{id}` against an unauthenticated
`/healthz` of the same server and kube-apiserver's own GET of the same Token object, at 1 and
32 concurrent clients over keep-alive HTTPS on loopback. Also the in-process cost of the
authentication decision alone."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import statistics
import time

import aiohttp

from corral.core.auth import hashing
from corral.core.auth.tokens import Policy, TokenRecord, check, split
from tests.bench.common import stack

REQUESTS = {1: 2000, 32: 6000}
WARMUP = 200


async def measure(
    url: str, headers: dict[str, str], context: ssl.SSLContext, concurrency: int, total: int
) -> tuple[float, float, float]:
    """Requests per second, p50 ms, p99 ms."""
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


def decision_cost() -> float:
    """Microseconds per authentication decision for a $3-hashed session token."""
    key = hashing.new_key()
    now = datetime.datetime.now(datetime.UTC)
    record = TokenRecord(
        name="token-abcde", user_id="u-1", stored=hashing.hash_key(key), ttl_ms=3_600_000,
        created=now, kind="session", is_derived=False, cluster_name="", enabled=True,
        description="", auth_provider="local", last_activity=None, uid="",
    )  # fmt: skip
    value, policy, rounds = f"token-abcde:{key}", Policy(idle_minutes=60), 20000
    began = time.perf_counter()
    for _ in range(rounds):
        _, presented = split(value)
        check(record, presented, True, now, policy, now)
    return (time.perf_counter() - began) / rounds * 1e6


def main() -> None:
    with stack(downstream_clusters=0) as env:
        print(f"authentication decision in-process: {decision_cost():.1f} µs")
        token_name = env.admin_token.split(":")[0]
        corral_tls = ssl.create_default_context(cafile=str(env.ca_path))
        kube_tls = ssl.create_default_context(cafile=str(env.management.ca_path))  # type: ignore[union-attr]
        kube_tls.load_cert_chain(*map(str, env.management._client_cert))  # type: ignore[union-attr]
        kube_url = env.management.server  # type: ignore[union-attr]
        cases: list[tuple[str, str, dict[str, str], ssl.SSLContext]] = [
            ("corral GET /v3/token/{id} (authenticated)", f"{env.api_url}/v3/token/{token_name}",
             {"Authorization": f"Bearer {env.admin_token}"}, corral_tls),
            ("corral GET /healthz (no authentication)", f"{env.api_url}/healthz", {}, corral_tls),
            ("kube-apiserver GET of the Token CR",
             f"{kube_url}/apis/management.svc.io/v3/tokens/{token_name}", {}, kube_tls),
        ]  # fmt: skip
        print(f"{'case':<45} {'clients':>7} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7}")
        for label, url, headers, context in cases:
            for concurrency, total in REQUESTS.items():
                rps, p50, p99 = asyncio.run(measure(url, headers, context, concurrency, total))
                print(f"{label:<45} {concurrency:>7} {rps:>8.0f} {p50:>7.2f} {p99:>7.2f}",
                      flush=True)  # fmt: skip
