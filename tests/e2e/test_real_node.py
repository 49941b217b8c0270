"""A real node (kubelet, containerd, runc, kube-proxy) beside the management control plane.

Real containers run, answer through a Service from the host and from other pods, stream their
logs and take exec, and stopping the environment leaves the host exactly as it was.
"""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.environment import Environment
from corral.devenv.host import HostNotReady, check_host
from corral.devenv.waiting import wait_for

from . import hoststate
from .conftest import stack_options

WEB = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {
                "name": "web",
                "image": "localhost/busybox:1",
                "imagePullPolicy": "Never",
                # PID 1 of a shell ignores SIGTERM unless told: deleting the pod would take 30 s.
                "command": [
                    "/bin/sh",
                    "-c",
                    "trap 'exit 0' TERM; echo started-for-real; "
                    "mkdir -p /www; echo served-by-a-real-pod > /www/index.html; "
                    "httpd -f -p 8080 -h /www & wait",
                ],
                "ports": [{"containerPort": 8080}],
                "resources": {"limits": {"cpu": "200m", "memory": "64Mi"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
            }
        ]
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web"},
    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
}


def test_real_node_runs_real_containers_and_leaves_the_host_unchanged(
    tmp_path: Path, devkube: Path
) -> None:
    try:
        check_host()
    except HostNotReady as exc:
        pytest.fail(f"this host cannot run a real node: {exc}")
    before = hoststate.snapshot()
    options = stack_options(
        tmp_path, devkube, start_corral=False, downstream_clusters=0, real_nodes=1
    )
    with Environment(options) as env:
        assert env.management is not None
        kubeconfig = str(env.management_kubeconfig)
        core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))
        node = core.read_node("management-real-0")
        assert node.status.node_info.container_runtime_version.startswith("containerd://")
        assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})

        core.create_namespaced_pod("default", WEB)
        core.create_namespaced_service("default", SERVICE)
        wait_for("pod web Ready", lambda: _ready(core.read_namespaced_pod("web", "default")), 60)

        # Logs and exec go through kube-apiserver to the kubelet and containerd.
        assert "started-for-real" in core.read_namespaced_pod_log("web", "default")
        cgroup = _kubectl(devkube, kubeconfig, "exec", "web", "--", "cat", "/proc/self/cgroup")
        memory = next(line for line in cgroup.splitlines() if ":memory:" in line)
        assert "/corral-node-management-real-0/kubepods/" in memory
        limit = _kubectl(
            devkube,
            kubeconfig,
            "exec",
            "web",
            "--",
            "cat",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        )
        assert int(limit) == 64 * 1024 * 1024

        # The Service answers the host (kube-proxy's rules in the node's network namespace)
        # and the pod itself through its ClusterIP.
        ip = core.read_namespaced_service("web", "default").spec.cluster_ip
        body = wait_for("Service from the host", lambda: _http_get(f"http://{ip}/"), 30)
        assert body.strip() == "served-by-a-real-pod"
        request = f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 5 {ip} 80'
        reply = _kubectl(devkube, kubeconfig, "exec", "web", "--", "sh", "-c", request)
        assert reply.splitlines()[-1] == "served-by-a-real-pod"

        # While it runs, the host's own settings are untouched.
        during = hoststate.snapshot()
        assert during["sysctls"] == before["sysctls"]
        assert during["iptables"] == before["iptables"]
    after = hoststate.snapshot()
    assert after == before


def _ready(pod: k8s.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as response:
        return str(response.read().decode())


def _kubectl(devkube: Path, kubeconfig: str, *args: str) -> str:
    cache = Path(kubeconfig).parent / "kubectl-cache"
    argv = [str(devkube), "kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}", *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
