"""What authentication and the worker processes cost: authenticated `GET /v3/token/{id}`
against an unauthenticated `/healthz` of the same server and kube-apiserver's own GET of the
same Token object, with one worker and with two, under wrk (one thread, 32 keep-alive TLS
connections) on loopback. Also the in-process cost of the authentication decision alone.

Client and servers share the machine's cores: compare figures within one run."""

from __future__ import annotations

import datetime
import re
import shutil
import statistics
import subprocess
import time
from typing import NamedTuple

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.apiserver.auth.verified import Standing, VerifiedTokens
from corral.core.auth import hashing
from corral.core.auth.tokens import Policy, TokenRecord, check, good_until, split
from corral.devenv.environment import Environment
from corral.devenv.process import Process
from tests.bench.common import stack, tree_cpu_seconds

CONNECTIONS = 32
SECONDS = 4
# The cases run in turn, this many times: on a shared machine a case measured once can fall
# in a busy moment; ratios are taken within a pass, between cases seconds apart.
PASSES = 3
ACCOUNT = "corral-bench"
# wrk's latency units, in milliseconds.
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def decision_costs() -> tuple[float, float]:
    """Microseconds per authentication decision for a $3-hashed session token: verifying its
    key and judging its standing, and with both remembered (`auth.verified`)."""
    key = hashing.new_key()
    now = datetime.datetime.now(datetime.UTC)
    record = TokenRecord(
        name="token-abcde", user_id="u-1", stored=hashing.hash_key(key), ttl_ms=3_600_000,
        created=now, kind="session", is_derived=False, cluster_name="", enabled=True,
        description="", auth_provider="local", last_activity=None, uid="", version="",
    )  # fmt: skip
    value, policy, rounds = f"token-abcde:{key}", Policy(idle_minutes=60), 20000
    known, stamp = VerifiedTokens(), (1, 1, 1, 1, 1)
    known.put(key, "1", record)
    known.judged(record.name, Standing(stamp, good_until(record, None, policy), False, ()))

    def verifying() -> None:
        _, presented = split(value)
        check(record, presented, True, now, policy, now)

    def remembered() -> None:
        name, presented = split(value)
        found, judged = known.get(name, presented, "1"), known.standing(name)
        assert found is not None and judged is not None and judged.holds(stamp, now)

    costs = []
    for decide in (verifying, remembered):
        began = time.perf_counter()
        for _ in range(rounds):
            decide()
        costs.append((time.perf_counter() - began) / rounds * 1e6)
    return costs[0], costs[1]


class Run(NamedTuple):
    rps: float
    p50: float  # ms
    p99: float  # ms
    cpu_us: float | None  # the server's CPU per request, when its processes are known


def wrk(url: str, headers: dict[str, str], server: Process | None = None) -> Run:
    """SECONDS of wrk at CONNECTIONS connections; with `server`, what its processes spent."""
    command = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "--latency", url]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    began = tree_cpu_seconds(server) if server else 0.0
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    spent = tree_cpu_seconds(server) - began if server else None
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw errors from {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]

    def percentile(p: str) -> float:
        found = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s|m)\s*$", out, re.M)
        if found is None:
            raise RuntimeError(f"no {p}th percentile in wrk's output:\n{out}")
        return float(found[1]) * UNITS[found[2]]

    cpu_us = None if spent is None else spent / requests * 1e6
    return Run(rps, percentile("50"), percentile("99"), cpu_us)


def kube_reader(env: Environment) -> str:
    """A bearer token of a service account that may read Token objects (wrk sends no client
    certificate)."""
    api = k8s_config.new_client_from_config(str(env.management_kubeconfig))
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account("svc-system", {"metadata": {"name": ACCOUNT}})
    rbac.create_cluster_role({
        "metadata": {"name": ACCOUNT},
        "rules": [{"apiGroups": ["management.svc.io"], "resources": ["tokens"], "verbs": ["get"]}],
    })  # fmt: skip
    rbac.create_cluster_role_binding({
        "metadata": {"name": ACCOUNT},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "svc-system"}],
    })  # fmt: skip
    request = core.create_namespaced_service_account_token(
        ACCOUNT, "svc-system", {"spec": {"expirationSeconds": 3600}}
    )
    return str(request.status.token)


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("auth: needs wrk (make bench-deps)")
    with stack(downstream_clusters=0) as env:
        verifying, remembered = decision_costs()
        print(f"authentication decision in-process: {verifying:.1f} µs verifying the key and "
              f"judging the standing, {remembered:.1f} µs with both remembered")  # fmt: skip
        two = env.add_apiserver_replica(workers=2)
        one = next(p for p in env.corral if p.name == "apiserver")
        two_workers = env.apiserver_replica(two)
        token_name = env.admin_token.split(":")[0]
        corral = {"Authorization": f"Bearer {env.admin_token}"}
        kube = {"Authorization": f"Bearer {kube_reader(env)}"}
        kube_url = f"{env.management.server}/apis/management.svc.io/v3/tokens/{token_name}"  # type: ignore[union-attr]
        cases = [
            ("corral GET /v3/token/{id}, 1 worker", f"{env.api_url}/v3/token/{token_name}",
             corral, one),
            ("corral GET /healthz, 1 worker", f"{env.api_url}/healthz", {}, one),
            ("corral GET /v3/token/{id}, 2 workers", f"{two}/v3/token/{token_name}", corral,
             two_workers),
            ("corral GET /healthz, 2 workers", f"{two}/healthz", {}, two_workers),
            ("kube-apiserver GET of the Token CR", kube_url, kube, None),
        ]  # fmt: skip
        print(f"wrk, 1 thread, {CONNECTIONS} keep-alive TLS connections, {SECONDS} s per case "
              f"and pass, the cases in turn, {PASSES} passes: medians; the server's CPU per "
              "request (its processes' user and system time over the requests served) is "
              "what the machine's load changes least")  # fmt: skip
        runs: dict[str, list[Run]] = {label: [] for label, *_ in cases}
        for _ in range(PASSES):
            for label, url, headers, server in cases:
                runs[label].append(wrk(url, headers, server))
        print(f"{'case':<42} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU µs/req':>10}")
        for label, measured in runs.items():
            rps, p50, p99 = (statistics.median(m[i] for m in measured) for i in range(3))
            spent = [m.cpu_us for m in measured if m.cpu_us is not None]
            cpu = f"{statistics.median(spent):>10.0f}" if spent else f"{'-':>10}"
            print(f"{label:<42} {rps:>8.0f} {p50:>7.2f} {p99:>7.2f} {cpu}")
        rates = [[m.rps for m in runs[cases[i][0]]] for i in (0, 1, 2, 4)]
        one_token, one_health, two_token, kube_get = rates
        comparisons = [
            ("token GET / healthz, 1 worker", one_token, one_health),
            ("token GET / kube-apiserver GET", one_token, kube_get),
            ("token GET, 2 workers / 1 worker", two_token, one_token),
        ]
        for name, over, under in comparisons:
            ratios = sorted(a / b for a, b in zip(over, under, strict=True))
            print(f"{name}: {statistics.median(ratios):.2f} "
                  f"(passes {ratios[0]:.2f}-{ratios[-1]:.2f})")  # fmt: skip
