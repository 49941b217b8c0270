"""A kwok node pool scaled 0 -> 100 -> 0 through /v3: how long until every machine is a Ready
node (and until all are gone), and what the operator spent doing it (CPU seconds, memory)."""

from __future__ import annotations

import time

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from tests.bench.common import cpu_seconds, get_json, rss_mib, send_json, stack

MACHINES = 100


def pool_count(env: Environment, pool: str, field: str) -> int:
    return int(get_json(env, f"{env.api_url}/v3/nodepools/{pool}")[field])


def main() -> None:
    with stack(downstream_clusters=1) as env:
        (operator,) = [p for p in env.corral if "operator" in p.name]
        template = send_json(
            env, "POST", f"{env.api_url}/v3/nodetemplates", {"kwokConfig": {"cpu": "2"}}
        )["id"]
        began_cpu, began_rss = cpu_seconds(operator), rss_mib(operator)
        began = time.monotonic()
        pool = send_json(
            env,
            "POST",
            f"{env.api_url}/v3/nodepools",
            {
                "clusterId": env.cluster_ids[0],
                "hostnamePrefix": "bench",
                "quantity": MACHINES,
                "nodeTemplateName": template,
            },
        )["id"]
        wait_for("every machine Ready", lambda: pool_count(env, pool, "ready") == MACHINES, 600)
        up = time.monotonic() - began
        print(
            f"pool 0 -> {MACHINES} kwok machines: all Ready nodes after {up:.1f} s; operator "
            f"CPU {cpu_seconds(operator) - began_cpu:.1f} s, RSS {began_rss:.0f} -> "
            f"{rss_mib(operator):.0f} MiB"
        )
        began_cpu, began = cpu_seconds(operator), time.monotonic()
        send_json(env, "PUT", f"{env.api_url}/v3/nodepools/{pool}", {"quantity": 0})
        wait_for("every machine gone", lambda: pool_count(env, pool, "requested") == 0, 600)
        print(
            f"pool {MACHINES} -> 0: all machines removed after {time.monotonic() - began:.1f} s; "
            f"operator CPU {cpu_seconds(operator) - began_cpu:.1f} s"
        )
