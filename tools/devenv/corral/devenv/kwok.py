"""What kwok answers for its fake pods' `pods/log`: one CRI-format log file saying the pod is
simulated, served for every container of every pod by a static `ClusterLogs` object.

Exec, attach and port-forward are left unconfigured by default: kwok would run the command
(or dial the port) on this host, for anyone allowed `create pods/exec` in the cluster. Without
a configuration kwok refuses them ("no exec found for container …"). A cluster only a test
uses may name namespaces whose pods run `exec` (`cluster_exec`): as nobody, in `/`; and forward
a pod's port to one of this host's loopback (`cluster_port_forward`).
Facts behind this: shared/reference/kwok-streaming.md.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

KWOK_API_VERSION = "kwok.x-k8s.io/v1alpha1"
SIMULATED_LOG = (
    "This pod is simulated by kwok: no container runs, so nothing of its own is logged.",
    "corral's local environment answers these lines for every simulated pod.",
    "Pods on a real node (python -m corral.devenv run --real-nodes 1) log for real.",
)


def cluster_logs(logs_file: Path) -> dict[str, Any]:
    """A `ClusterLogs` matching every pod and container (empty selector and container lists
    match all) with `logs_file` as their log."""
    return {
        "apiVersion": KWOK_API_VERSION,
        "kind": "ClusterLogs",
        "metadata": {"name": "corral-simulated-pods"},
        "spec": {"selector": {}, "logs": [{"containers": [], "logsFile": str(logs_file)}]},
    }


NOBODY = 65534


def cluster_exec(namespaces: Sequence[str]) -> dict[str, Any]:
    """A `ClusterExec` running the commands of `exec` into the pods of `namespaces` on this host
    (with kwok's environment), as nobody in `/`."""
    return {
        "apiVersion": KWOK_API_VERSION,
        "kind": "ClusterExec",
        "metadata": {"name": "corral-test-exec"},
        "spec": {
            "selector": {"matchNamespaces": list(namespaces)},
            "execs": [{"containers": [], "local": {
                "workDir": "/",
                "securityContext": {"runAsUser": NOBODY, "runAsGroup": NOBODY},
            }}],
        },
    }  # fmt: skip


def cluster_port_forward(namespaces: Sequence[str], ports: Mapping[int, int]) -> dict[str, Any]:
    """A `ClusterPortForward` taking each pod port of `ports` in the pods of `namespaces` to
    127.0.0.1:<its local port> of kwok's host."""
    return {
        "apiVersion": KWOK_API_VERSION,
        "kind": "ClusterPortForward",
        "metadata": {"name": "corral-test-port-forward"},
        "spec": {
            "selector": {"matchNamespaces": list(namespaces)},
            "forwards": [{"ports": [pod], "target": {"port": local, "address": "127.0.0.1"}}
                         for pod, local in ports.items()],
        },
    }  # fmt: skip


def cri_log(lines: tuple[str, ...], at: datetime.datetime) -> str:
    """`lines` in the CRI log format kwok reads (`<RFC 3339 nano> stdout F <line>`), all
    stamped `at`."""
    stamp = at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
    return "".join(f"{stamp} stdout F {line}\n" for line in lines)
