"""What authentication and the worker processes cost: authenticated `GET /v3/token/{id}`
against an unauthenticated `/healthz` of the same server and kube-apiserver's own GET of the
same Token object, with one worker and with two, under wrk (one thread, 32 keep-alive TLS
connections) on loopback. Also the in-process cost of the authentication decision alone.

Client and servers share the machine's cores: compare figures within one run."""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import time

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.auth import hashing
from corral.core.auth.tokens import Policy, TokenRecord, check, split
from corral.devenv.environment import Environment
from tests.bench.common import stack

CONNECTIONS = 32
SECONDS = 8
ACCOUNT = "corral-bench"
# wrk's latency units, in milliseconds.
UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


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


def wrk(url: str, headers: dict[str, str]) -> tuple[float, float, float]:
    """Requests per second, p50 ms, p99 ms of SECONDS of wrk at CONNECTIONS connections."""
    command = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{SECONDS}s", "--latency", url]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"wrk saw errors from {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]

    def percentile(p: str) -> float:
        number, unit = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)$", out, re.M).groups()  # type: ignore[union-attr]
        return float(number) * UNITS[unit]

    return rps, percentile("50"), percentile("99")


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
        print(f"authentication decision in-process: {decision_cost():.1f} µs")
        two = env.add_apiserver_replica(workers=2)
        token_name = env.admin_token.split(":")[0]
        corral = {"Authorization": f"Bearer {env.admin_token}"}
        kube = {"Authorization": f"Bearer {kube_reader(env)}"}
        kube_url = f"{env.management.server}/apis/management.svc.io/v3/tokens/{token_name}"  # type: ignore[union-attr]
        cases = [
            ("corral GET /v3/token/{id}, 1 worker", f"{env.api_url}/v3/token/{token_name}", corral),
            ("corral GET /healthz, 1 worker", f"{env.api_url}/healthz", {}),
            ("corral GET /v3/token/{id}, 2 workers", f"{two}/v3/token/{token_name}", corral),
            ("corral GET /healthz, 2 workers", f"{two}/healthz", {}),
            ("kube-apiserver GET of the Token CR", kube_url, kube),
        ]  # fmt: skip
        print(f"wrk, 1 thread, {CONNECTIONS} keep-alive TLS connections, {SECONDS} s each")
        print(f"{'case':<42} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7}")
        rates = {}
        for label, url, headers in cases:
            rps, p50, p99 = wrk(url, headers)
            rates[label] = rps
            print(f"{label:<42} {rps:>8.0f} {p50:>7.2f} {p99:>7.2f}", flush=True)
        token, health = rates[cases[0][0]], rates[cases[1][0]]
        print(f"token GET / healthz, 1 worker: {token / health:.2f}; "
              f"token GET / kube-apiserver GET: {token / rates[cases[4][0]]:.2f}; "
              f"2 workers / 1 worker (token GET): {rates[cases[2][0]] / token:.2f}")  # fmt: skip
