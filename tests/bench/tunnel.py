"""The cluster agent's tunnel against a direct connection (docs/design/cluster-agent.md).

One simulated cluster is imported by kubeconfig (corral dials its API server) and measured,
then switched to its agent as a user switches it (a registration token's command run there,
the agent started with what the manifest made) and measured again: the same API server, the
same corral and the same `/k8s/clusters/{id}` proxy, only the transport differs. Each case
also runs straight against the cluster's API server, the floor. The cluster is on this host's
loopback, not in a network namespace as in the e2e: corral's direct connection needs a route
to it, and the e2e's uplink (a thread copying bytes) would be measured too.

- GET of one object (the `default` namespace) by 32 concurrent clients: req/s, p50, p99.
- exec: `kubectl exec … head -c 64M /dev/zero` (kwok runs it on this host): the output's
  bytes over the wall time of the whole kubectl run (its start and the exec's set-up too);
  a run whose output came short (its stream closed before the end) is counted, not timed.
- port-forward: one `kubectl port-forward`, five connections through it to a server here
  that writes 64 MiB on each: bytes over the time from connecting to the last byte.
- memory: the API server's RSS before the tunnel, with it, and with four more clusters
  registered through their agents; the agent's RSS after carrying the cases.
- the time from the registration command (`kubectl apply`) to the cluster Active, for those
  four (POST with only a name): the agent is started as soon as the command has run.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import os
import re
import socket
import socketserver
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.devenv.agents import agent_environment, run_registration
from corral.devenv.controlplane import ControlPlane, free_port
from corral.devenv.environment import Environment
from corral.devenv.process import Process, stop_all
from corral.devenv.waiting import wait_for
from tests.bench.common import (
    REQUESTS,
    ROOT,
    cpu_seconds,
    get_json,
    measure,
    rss_mib,
    send_json,
    stack,
)

DEVKUBE = ROOT / "tools/devkube/bin/devkube"
CONCURRENCY = 32
FRESH = 4  # clusters registered through their agents after the measured one
STREAMS = "bench-streams"  # the namespace whose kwok pods run exec and forward POD_PORT
POD_PORT = 8080
PAYLOAD = 64 * 2**20  # bytes of each exec's output and of each forwarded connection
ROUNDS = 5
ACTIVE_TIMEOUT = 120.0


class _Zeros(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(bytes(PAYLOAD))


@contextmanager
def zeros_server(port: int) -> Iterator[None]:
    """What the pod's forwarded port reaches: PAYLOAD zero bytes on each connection."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", port), _Zeros)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def load() -> str:
    return "load average " + " ".join(f"{a:.1f}" for a in os.getloadavg())


def kubectl(config: Path, cache: Path, *args: str) -> list[str]:
    return [str(DEVKUBE), "kubectl", f"--kubeconfig={config}", f"--cache-dir={cache}", *args]


def exec_mib_s(config: Path, cache: Path, pod: str) -> str:
    """MiB/s of an exec's output, the median of the ROUNDS runs of kubectl that got all of it,
    and how many did not (an exec cut short is a figure too: docs/design/cluster-agent.md)."""
    seconds, cut = [], 0
    for _ in range(ROUNDS):
        began = time.perf_counter()
        done = subprocess.run(
            kubectl(config, cache, "exec", "-n", STREAMS, pod, "--", "head", "-c", str(PAYLOAD),
                    "/dev/zero"),
            capture_output=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode == 0 and len(done.stdout) == PAYLOAD:
            seconds.append(time.perf_counter() - began)
        else:
            cut += 1
    rate = f"{PAYLOAD / 2**20 / statistics.median(seconds):.1f}" if seconds else "-"
    return f"{rate} ({cut} cut)" if cut else rate


def forward_mib_s(config: Path, cache: Path, pod: str) -> float:
    """MiB/s through a port-forward, the median of ROUNDS connections."""
    forward = subprocess.Popen(
        kubectl(config, cache, "port-forward", "--address=127.0.0.1", "-n", STREAMS,
                f"pod/{pod}", f":{POD_PORT}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        found = re.search(rf"Forwarding from 127\.0\.0\.1:(\d+) -> {POD_PORT}", line)
        assert found, line
        seconds = []
        for _ in range(ROUNDS):
            began = time.perf_counter()
            with socket.create_connection(("127.0.0.1", int(found.group(1))), timeout=60) as conn:
                received = 0
                while received < PAYLOAD and (chunk := conn.recv(1 << 20)):
                    received += len(chunk)
            seconds.append(time.perf_counter() - began)
            assert received == PAYLOAD, received
    finally:
        forward.terminate()
        forward.wait(10)
    return PAYLOAD / 2**20 / statistics.median(seconds)


def row(
    label: str, url: str, headers: dict[str, str], context: ssl.SSLContext, config: Path,
    cache: Path, pod: str,
) -> None:  # fmt: skip
    rate, p50, p99 = asyncio.run(measure(url, headers, context, CONCURRENCY, REQUESTS[32]))
    exec_rate = exec_mib_s(config, cache, pod)
    forward_rate = forward_mib_s(config, cache, pod)
    print(f"{label:<26} {rate:>8.0f} {p50:>8.1f} {p99:>8.1f} {exec_rate:>12} "
          f"{forward_rate:>12.1f}   ({load()})", flush=True)  # fmt: skip


def streaming_pod(plane: ControlPlane) -> str:
    """A pod on the cluster's kwok node in the namespace whose pods run exec and forward."""
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(plane.kubeconfig_path)))
    core.create_namespace({"metadata": {"name": STREAMS}})
    core.create_namespaced_pod(STREAMS, {
        "metadata": {"name": "streams"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}],
                 "tolerations": [{"operator": "Exists"}]},
    })  # fmt: skip
    wait_for("the pod running",
             lambda: core.read_namespaced_pod("streams", STREAMS).status.phase == "Running",
             60)  # fmt: skip
    return "streams"


def state(env: Environment, cluster: str) -> str:
    return str(get_json(env, f"{env.api_url}/v3/clusters/{cluster}")["state"])


def connected(env: Environment, cluster: str) -> bool:
    conditions = get_json(env, f"{env.api_url}/v3/clusters/{cluster}")["status"]["conditions"]
    return any(c["type"] == "AgentDeployed" and c.get("reason") == "AgentConnected"
               for c in conditions)  # fmt: skip


def register(env: Environment, cluster: str, plane: ControlPlane, work: Path) -> Process:
    """The registration command of a new token of `cluster` run in `plane`, then its agent."""
    tokens = f"{env.api_url}/v3/clusterregistrationtokens"
    token = send_json(env, "POST", tokens, {"type": "clusterRegistrationToken",
                                             "clusterId": cluster})["id"]  # fmt: skip
    command = wait_for(
        "the token's command", lambda: get_json(env, f"{tokens}/{token}")["insecureCommand"], 30
    )
    directory = work / cluster
    directory.mkdir()
    applied = run_registration(command, DEVKUBE, plane, directory)
    assert applied.returncode == 0, applied.stderr
    config = functools.partial(kubectl, plane.kubeconfig_path, directory)
    return Process(
        f"agent-{cluster}",
        [sys.executable, "-m", "corral.agent"],
        directory / "agent.log",
        env=agent_environment(config, plane, directory),
    )


def main() -> None:
    forward_target = free_port()
    with (
        stack(downstream_clusters=0) as env,
        tempfile.TemporaryDirectory() as tmp,
        zeros_server(forward_target),
    ):
        work = Path(tmp)
        apiserver = next(p for p in env.corral if p.name == "apiserver")
        agents: list[Process] = []
        try:
            plane = env.add_downstream("measured", 1, [STREAMS], {POD_PORT: forward_target})
            config = base64.b64encode(plane.kubeconfig_path.read_bytes()).decode()
            cluster = send_json(env, "POST", f"{env.api_url}/v3/clusters", {
                "type": "cluster", "name": "measured", "importedConfig": {"kubeConfig": config},
            })["id"]  # fmt: skip
            wait_for("the imported cluster active", lambda: state(env, cluster) == "active",
                     ACTIVE_TIMEOUT)  # fmt: skip
            pod = streaming_pod(plane)
            generated = work / "generated.kubeconfig"
            answer = send_json(
                env, "POST", f"{env.api_url}/v3/clusters/{cluster}?action=generateKubeconfig"
            )
            generated.write_bytes(base64.b64decode(answer["config"]))
            generated.chmod(0o600)

            direct = ssl.create_default_context(cafile=str(plane.ca_path))
            direct.load_cert_chain(plane.pki_dir / "admin.crt", plane.pki_dir / "admin.key")
            corral = ssl.create_default_context(cafile=str(env.ca_path))
            bearer = {"Authorization": f"Bearer {env.admin_token}"}
            proxied = f"{env.api_url}/k8s/clusters/{cluster}/api/v1/namespaces/default"
            print(f"{'GET one object, 32 at once':<26} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
                  f"{'exec MiB/s':>12} {'forward MiB/s':>12}")  # fmt: skip
            row("kube-apiserver directly", f"{plane.server}/api/v1/namespaces/default", {},
                direct, plane.kubeconfig_path, work, pod)  # fmt: skip
            row("corral, direct", proxied, bearer, corral, generated, work, pod)
            before = rss_mib(apiserver)

            began = time.monotonic()
            agents.append(register(env, cluster, plane, work))
            wait_for("the agent connected", lambda: connected(env, cluster), ACTIVE_TIMEOUT,
                     interval=0.2)  # fmt: skip
            switched = time.monotonic() - began
            one = rss_mib(apiserver)
            agent_cpu = cpu_seconds(agents[0])
            row("corral, tunnel", proxied, bearer, corral, generated, work, pod)
            print(
                f"agent: {cpu_seconds(agents[0]) - agent_cpu:.1f} s of CPU during the tunnel "
                f"cases (the requests went through it), RSS {rss_mib(agents[0]):.0f} MiB"
            )

            planes = [env.add_downstream(f"fresh{i}", 1) for i in range(FRESH)]
            seconds = []
            for fresh in planes:
                made = send_json(env, "POST", f"{env.api_url}/v3/clusters",
                                 {"type": "cluster", "name": fresh.name})["id"]  # fmt: skip
                began = time.monotonic()
                agents.append(register(env, made, fresh, work))
                wait_for("the cluster active", lambda made=made: state(env, made) == "active",
                         ACTIVE_TIMEOUT, interval=0.2)  # fmt: skip
                seconds.append(time.monotonic() - began)
            five = rss_mib(apiserver)
            print(f"registration command to AgentConnected, a cluster imported by kubeconfig: "
                  f"{switched:.1f} s")  # fmt: skip
            print(
                "registration command to Active, a new cluster: "
                + ", ".join(f"{s:.1f}" for s in seconds)
                + " s"
            )
            print(f"API server RSS: {before:.0f} MiB without a tunnel, {one:.0f} MiB with one, "
                  f"{five:.0f} MiB with {FRESH + 1} ({(five - one) / FRESH:.1f} MiB a cluster "
                  "registered through its agent)")  # fmt: skip
            print("agent RSS: " + ", ".join(f"{rss_mib(a):.0f}" for a in agents) + " MiB")
            print(load())
        finally:
            stop_all(agents)
