"""A cluster corral cannot reach, registered through its agent, the whole stack running.

The downstream cluster (its own etcd, control plane and a kwok node) runs in a network namespace
with nothing but its loopback and one outbound way to corral's port (corral.devenv.isolated):
no process of corral's can dial its API server, and the test shows that a direct connection
fails. `POST /v3/clusters` with only a name gives the registration; its `insecureCommand` is run
in there, as a user would run it; `corral-agent` then runs in there too, as the manifest's
Deployment runs it (its environment, the credential Secret and the ServiceAccount token the
manifest made), and everything corral does with the cluster goes through the agent's tunnel:
the cluster goes Active, `/k8s/clusters/{id}`, a project's workload, its logs and exec (a large
one read slowly, whole), kubectl through a generated kubeconfig, losing the agent (stopped or
killed) and getting it back, and the API server replica holding the tunnel stopped or killed
while another serves the user.
Deleting the cluster removes what the manifest made there, through the tunnel, and revokes the
agent's credential.

The agent run from corral's image as the manifest's pod on a real node: test_agent_pod.py.
"""

from __future__ import annotations

import base64
import datetime
import functools
import http.client
import http.server
import json
import os
import re
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s

from corral.core.api import names
from corral.core.kube import connect, tunnel_leases
from corral.core.tunnel import handshake, manifest
from corral.devenv.agents import KUBECTL_TIMEOUT, agent_environment, kubectl_json, run_registration
from corral.devenv.controlplane import ControlPlane, free_port
from corral.devenv.environment import Environment
from corral.devenv.isolated import IsolatedCluster
from corral.devenv.waiting import wait_for

from .api import Api
from .slow_exec import slow_exec

pytestmark = pytest.mark.timeout(600)

# The namespace made through /v3 whose (kwok) pods run what exec asks, and forward POD_PORT
# to FORWARD_TARGET on the loopback of the cluster's network, where the test serves PAGE.
WORKLOADS = "tunnelled"
POD_PORT = 8080
FORWARD_TARGET = free_port()
PAGE = b"served-inside-the-unreachable-network"
# The bounds: Ready False within 15 s of losing the agent (a Lease not renewed for
# that long is a lost agent), True again within 5 s of its return.
LOST_WITHIN = float(tunnel_leases.LEASE_SECONDS)
BACK_WITHIN = 5.0
# A user's request through a replica that stays is answered, one way or the other, within this.
ANSWERED_WITHIN = 10.0
# A large exec read slowly through the tunnel, three times (tests/e2e/slow_exec.py).
SLOW_EXEC_SIZE = 16 * 2**20
SLOW_EXECS = 3


@dataclass
class Registered:
    """The cluster corral cannot reach, registered in corral, and its agent's process."""

    id: str
    isolated: IsolatedCluster
    agent_command: list[str]
    agent_env: dict[str, str]
    agent_log: Path
    image: str
    agent: subprocess.Popen[bytes] | None = None

    def start_agent(self) -> None:
        with self.agent_log.open("ab") as log:
            self.agent = subprocess.Popen(self.agent_command, env=self.agent_env,
                                          stdout=log, stderr=subprocess.STDOUT)  # fmt: skip

    def stop_agent(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.send_signal(sig)
            self.agent.wait(10)


def _conditions(api: Api, cluster_id: str) -> dict[str, tuple[str, str, str]]:
    body = api.get(f"/v3/clusters/{cluster_id}").body
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in (body.get("status") or {}).get("conditions") or []
    }


def _state(api: Api, cluster_id: str) -> str:
    state: str = api.get(f"/v3/clusters/{cluster_id}").body["state"]
    return state


def _inside_json(isolated: IsolatedCluster, devkube: Path, *args: str) -> dict[str, Any]:
    """An object of the downstream cluster, read with kubectl inside its network."""
    return kubectl_json(functools.partial(isolated.kubectl, devkube), *args)


@pytest.fixture(scope="module")
def registered(
    stack: Environment, api: Api, devkube: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registered]:
    directory = tmp_path_factory.mktemp("agent")
    corral_port = urlsplit(stack.api_url).port
    assert corral_port is not None
    isolated = IsolatedCluster.start("agented", devkube, directory, corral_port,
                                     stream_namespaces=[WORKLOADS],
                                     port_forwards={POD_PORT: FORWARD_TARGET})  # fmt: skip
    try:
        made = api.post("/v3/clusters", {"type": "cluster", "name": "agented"})
        assert made.status == 201, made.body
        cluster_id = made.body["id"]

        def default_token() -> dict[str, Any] | None:
            listed = api.get(f"/v3/clusterregistrationtokens?clusterId={cluster_id}").body
            return next((t for t in listed["data"] if t["manifestUrl"]), None)

        token = wait_for("the cluster's registration token", default_token, 30)
        # The user runs the registration command in the cluster (corral's certificate is
        # self-signed here, hence the insecure one; the agent pins corral's CA itself).
        applied = run_registration(token["insecureCommand"], devkube, isolated.plane, directory,
                                   isolated.network.enter())  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        assert f"deployment.apps/{manifest.NAME} created" in applied.stdout, applied.stdout
        env = agent_environment(functools.partial(isolated.kubectl, devkube), isolated.plane,
                                directory)  # fmt: skip
        registration = Registered(
            cluster_id, isolated, isolated.network.command([sys.executable, "-m", "corral.agent"]),
            env, directory / "agent.log", env["CORRAL_AGENT_IMAGE"],
        )  # fmt: skip
        registration.start_agent()
        yield registration
        registration.stop_agent()
        # The last test deletes it; a module cut short leaves it for here.
        assert api.delete(f"/v3/clusters/{cluster_id}").status in (200, 204, 404)
    finally:
        isolated.close()


@pytest.fixture(scope="module")
def active(api: Api, registered: Registered) -> Registered:
    wait_for("the cluster to go active through its agent",
             lambda: _state(api, registered.id) == "active", 90, interval=0.5)  # fmt: skip
    return registered


def test_corral_cannot_reach_the_clusters_api_server_directly(registered: Registered) -> None:
    server = urlsplit(registered.isolated.plane.server)
    assert server.hostname is not None and server.port is not None
    # From here, which is where corral's API server and operator run: nothing listens there.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((server.hostname, server.port), timeout=5)
    # From inside the cluster's network, its API server answers on that very address.
    inside = registered.isolated.network.call(
        socket.create_connection, (server.hostname, server.port), 5
    )
    inside.close()


def test_the_cluster_goes_active_through_its_agent(api: Api, active: Registered) -> None:
    deployed = _conditions(api, active.id)["AgentDeployed"]
    assert deployed[:2] == ("True", "AgentConnected") and deployed[2].startswith("agent ")
    assert api.get(f"/v3/clusters/{active.id}").body["status"]["agentImage"] == active.image
    # The proxy reaches the cluster through the tunnel: its node is there.
    nodes = api.get(f"/k8s/clusters/{active.id}/api/v1/nodes")
    assert nodes.status == 200, nodes.body.get("message")
    assert [n["metadata"]["name"] for n in nodes.body["items"]] == ["agented-node-0"]


@pytest.fixture(scope="module")
def workload(api: Api, active: Registered) -> dict[str, str]:
    """A project, its namespace and a Deployment made through /v3, its pod running on the
    cluster's (kwok) node."""
    project = api.post("/v3/projects", {"type": "project", "clusterId": active.id,
                                        "name": f"tunnel-{secrets.token_hex(3)}"})  # fmt: skip
    assert project.status == 201, project.body
    namespace = api.post(f"/v3/clusters/{active.id}/namespaces",
                         {"type": "namespace", "name": WORKLOADS,
                          "projectId": project.body["id"]})  # fmt: skip
    assert namespace.status == 201, namespace.body
    base = f"/v3/projects/{project.body['id']}/workloads"
    container = {"name": "app", "image": "busybox", "command": ["sleep", "infinity"]}
    created = api.post(base, {"name": "talker", "namespaceId": WORKLOADS,
                              "containers": [container]})  # fmt: skip
    assert created.status == 201, created.body
    wid = created.body["id"]
    wait_for("the workload active", lambda: api.get(f"{base}/{wid}").body["state"] == "active",
             90, interval=0.5)  # fmt: skip
    pods = api.get(f"/v3/projects/{project.body['id']}/pods?workloadId={wid}").body["data"]
    assert len(pods) == 1, pods
    return {"project": project.body["id"], "workload": wid, "pod": pods[0]["id"]}


def test_a_workload_runs_and_its_pod_logs_and_execs_through_the_tunnel(
    api: Api, active: Registered, workload: dict[str, str], devkube: Path
) -> None:
    # The pod is in the cluster itself, seen from inside its network.
    name = workload["pod"].split(":")[1]
    pod = _inside_json(active.isolated, devkube, "-n", WORKLOADS, "get", "pod", name)
    assert pod["status"]["phase"] == "Running"

    pod_url = f"/v3/projects/{workload['project']}/pods/{workload['pod']}"
    logs = api.get(f"{pod_url}/logs")
    assert logs.status == 200 and "This pod is simulated by kwok" in logs.body, logs.body
    # kwok runs the command on its host as nobody (corral.devenv.kwok), and tells a failing
    # command's exit status as an error of its own: exit codes are proved on a real node.
    command = ["sh", "-c", "echo through-$((6*7)); id -u; echo oops >&2"]
    ran = api.post(f"{pod_url}?action=execute", {"command": command})
    assert ran.status == 200, ran.body
    assert ran.body["stdout"] == "through-42\n65534\n" and ran.body["stderr"] == "oops\n", ran.body
    assert ran.body["exitCode"] == 0


def test_kubectl_reaches_the_cluster_through_a_generated_kubeconfig(
    api: Api, active: Registered, workload: dict[str, str], devkube: Path, tmp_path: Path
) -> None:
    generated = api.post(f"/v3/clusters/{active.id}?action=generateKubeconfig")
    assert generated.status == 200, generated.body
    config = tmp_path / "kubeconfig"
    config.write_bytes(base64.b64decode(generated.body["config"]))
    config.chmod(0o600)

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(devkube), "kubectl", f"--kubeconfig={config}", f"--cache-dir={tmp_path}", *args],
            capture_output=True, text=True, timeout=KUBECTL_TIMEOUT, check=False,
        )  # fmt: skip

    nodes = kubectl("get", "nodes", "-o", "name")
    assert (nodes.returncode, nodes.stdout) == (0, "node/agented-node-0\n"), nodes.stderr
    name = workload["pod"].split(":")[1]
    logs = kubectl("logs", "-n", WORKLOADS, name)
    assert logs.returncode == 0 and "This pod is simulated by kwok" in logs.stdout, logs.stderr
    # About 110 KiB back: many frames of the tunnel. (Not stdin: kwok never ends it.)
    done = kubectl("exec", "-n", WORKLOADS, name, "--", "seq", "1", "20000")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "".join(f"{i}\n" for i in range(1, 20001))


def test_a_slow_client_gets_all_of_a_large_exec_through_the_tunnel(
    stack: Environment, api: Api, corral_tls: ssl.SSLContext, active: Registered,
    workload: dict[str, str],
) -> None:  # fmt: skip
    # As test_proxy_exec.py does with the direct transport: corral holds back reading from the
    # tunnel for a client slower than kube-apiserver, and the end must still reach it.
    assert api.token is not None
    name = workload["pod"].split(":")[1]
    for _ in range(SLOW_EXECS):
        got = slow_exec(stack.api_url, api.token, corral_tls, active.id, WORKLOADS, name,
                        SLOW_EXEC_SIZE)  # fmt: skip
        assert (got.stdout, got.close) == (SLOW_EXEC_SIZE, 1000), got
        assert json.loads(got.status)["status"] == "Success", got


def test_a_stream_through_the_tunnel_outlives_the_time_allowed_to_open_it(
    api: Api, active: Registered, workload: dict[str, str]
) -> None:
    # The loopback proxy bounds the opening of a connection to the tunnel by OPEN_TIMEOUT;
    # it used to bound the whole connection, so every stream was cut after it.
    pod_url = f"/v3/projects/{workload['project']}/pods/{workload['pod']}"
    command = ["sh", "-c", f"sleep {connect.OPEN_TIMEOUT + 2:.0f}; echo still-here"]
    ran = api.post(f"{pod_url}?action=execute", {"command": command})
    assert ran.status == 200, ran.body
    assert (ran.body["stdout"], ran.body["exitCode"]) == ("still-here\n", 0), ran.body


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *_: object) -> None:
        pass


def test_port_forward_reaches_the_pods_port_through_the_tunnel(
    api: Api, active: Registered, workload: dict[str, str], devkube: Path, tmp_path: Path
) -> None:
    # Bound inside the cluster's network: only what reaches into it (the tunnel) gets there.
    server = active.isolated.network.call(
        http.server.ThreadingHTTPServer, ("127.0.0.1", FORWARD_TARGET), _Page
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    generated = api.post(f"/v3/clusters/{active.id}?action=generateKubeconfig")
    assert generated.status == 200, generated.body
    config = tmp_path / "kubeconfig"
    config.write_bytes(base64.b64decode(generated.body["config"]))
    config.chmod(0o600)
    name = workload["pod"].split(":")[1]
    forward = subprocess.Popen(
        [str(devkube), "kubectl", f"--kubeconfig={config}", f"--cache-dir={tmp_path}",
         "port-forward", "--address=127.0.0.1", "-n", WORKLOADS, f"pod/{name}", f":{POD_PORT}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()
        found = re.search(rf"Forwarding from 127\.0\.0\.1:(\d+) -> {POD_PORT}", line)
        assert found, line
        url = f"http://127.0.0.1:{found.group(1)}/"
        for _ in range(3):  # each connection a new stream of the forward
            with urllib.request.urlopen(url, timeout=30) as answer:
                assert answer.read() == PAGE
    finally:
        forward.terminate()
        forward.wait(10)
        server.shutdown()
        server.server_close()


def test_a_put_of_the_agent_settings_rolls_the_agents_deployment(
    api: Api, active: Registered, devkube: Path
) -> None:
    env = [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}]
    customization = {
        "appendTolerations": [{"key": "dedicated", "operator": "Equal", "value": "edge",
                               "effect": "NoSchedule"}],
        "overrideResourceRequirements": {"limits": {"memory": "128Mi"}},
    }  # fmt: skip
    before = _inside_json(active.isolated, devkube, "-n", manifest.NAMESPACE, "get",
                          "deployment", manifest.NAME)  # fmt: skip
    body = {"agentEnvVars": env, "clusterAgentDeploymentCustomization": customization}
    changed = api.put(f"/v3/clusters/{active.id}", body)
    assert changed.status == 200, changed.body

    def rolled() -> dict[str, Any] | None:
        deployment = _inside_json(active.isolated, devkube, "-n", manifest.NAMESPACE, "get",
                                  "deployment", manifest.NAME)  # fmt: skip
        pod = deployment["spec"]["template"]["spec"]
        return pod if pod.get("tolerations") == customization["appendTolerations"] else None

    pod = wait_for("the agent's Deployment with the new settings", rolled, 30, interval=0.5)
    (container,) = pod["containers"]
    assert container["env"][-1] == env[0]
    assert container["resources"] == customization["overrideResourceRequirements"]
    # Corral's own variables stay as the manifest made them.
    assert container["env"][:-1] == before["spec"]["template"]["spec"]["containers"][0]["env"]


def _lease(management: k8s.ApiClient, cluster_id: str) -> k8s.V1Lease | None:
    try:
        return k8s.CoordinationV1Api(management).read_namespaced_lease(
            names.tunnel_lease_name(cluster_id), names.SYSTEM_NAMESPACE
        )
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _disconnected(api: Api, cluster_id: str) -> bool:
    ready = _conditions(api, cluster_id).get("Ready")
    return ready is not None and ready[:2] == ("False", "AgentDisconnected")


def _back_within_bound(api: Api, management: k8s.ApiClient, cluster_id: str,
                       previous_holder: str | None = None) -> k8s.V1Lease:  # fmt: skip
    """Waits for the agent's tunnel to be taken again (by a holder other than
    `previous_holder`), then for Ready True, and asserts the cluster was back within
    BACK_WITHIN of the moment the tunnel was taken: the Ready condition's last transition
    against the Lease's acquireTime, both written by corral as they happened, so the test's
    own polling (slow on a loaded machine) is not counted."""

    def taken() -> k8s.V1Lease | None:
        lease = _lease(management, cluster_id)
        if lease is None or lease.spec.holder_identity in (None, previous_holder):
            return None
        return lease

    lease = wait_for("the agent's tunnel taken again", taken, 60, interval=0.2)

    def ready() -> bool:
        return _conditions(api, cluster_id).get("Ready", ("",))[0] == "True"

    wait_for("Ready True with the agent back", ready, 30, interval=0.2)
    cluster = k8s.CustomObjectsApi(management).get_cluster_custom_object(
        "management.svc.io", "v3", "clusters", cluster_id
    )
    (condition,) = [c for c in cluster["status"]["conditions"] if c["type"] == "Ready"]
    became = datetime.datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
    back = became - lease.spec.acquire_time
    assert back.total_seconds() <= BACK_WITHIN, f"Ready {back} after the tunnel was taken"
    assert _state(api, cluster_id) == "active"
    return lease


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_cluster_is_unavailable_without_its_agent_and_back_with_it(
    api: Api, active: Registered, management: k8s.ApiClient, sig: signal.Signals
) -> None:
    """The agent stopped as its pod is deleted (SIGTERM), or killed with no chance to say
    goodbye (SIGKILL, as an OOM kill or a lost node): Ready False within 15 s either way."""
    active.stop_agent(sig)
    lost = time.monotonic()
    wait_for("Ready False AgentDisconnected without the agent",
             lambda: _disconnected(api, active.id), LOST_WITHIN, interval=0.2)  # fmt: skip
    assert time.monotonic() - lost <= LOST_WITHIN
    assert _state(api, active.id) == "unavailable"
    # Nothing else leads there: the proxy cannot reach the cluster either.
    assert api.get(f"/k8s/clusters/{active.id}/api/v1/nodes").status == 503

    active.start_agent()
    _back_within_bound(api, management, active.id)
    assert api.get(f"/k8s/clusters/{active.id}/api/v1/nodes").status == 200


# What a request whose connection broke before its answer came "got".
CUT = 0


@dataclass
class _Asked:
    """What a user asking through one replica got, request after request, while the tunnel
    moved: (monotonic time asked, time answered, status or CUT) of each."""

    answers: list[tuple[float, float, int]]
    stop: threading.Event


def _keep_asking(api: Api, path: str) -> tuple[_Asked, threading.Thread]:
    asked = _Asked([], threading.Event())

    def ask() -> None:
        while not asked.stop.is_set():
            began = time.monotonic()
            try:
                status = api.get(path).status
            except (OSError, http.client.HTTPException):
                status = CUT
            asked.answers.append((began, time.monotonic(), status))
            asked.stop.wait(0.1)  # the user's pace, not a wait for a condition

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    return asked, thread


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_tunnel_moves_when_the_replica_holding_it_goes(
    api: Api, active: Registered, stack: Environment, management: k8s.ApiClient,
    workload: dict[str, str], sig: signal.Signals,
) -> None:  # fmt: skip
    """Two API server replicas behind corral's one URL; the agent's tunnel is held by the
    second, and the user works through the first, which reaches the tunnel through the
    second's relay. The second stops (SIGTERM, a rolling update) or is killed (SIGKILL): the
    agent dials again, reaches the first, the Lease moves, the cluster is Ready within the
    bound, and the user's requests through the first replica succeed throughout but for
    503s while no replica holds the tunnel, which a client retries; nothing they made is
    lost."""
    corral_port = urlsplit(stack.api_url).port
    assert corral_port is not None
    second = stack.add_apiserver_replica()
    replica = stack.apiserver_replica(second)
    logged = replica.log_path.stat().st_size  # a replica's log is appended to when reused
    try:
        # The agent's next dial reaches the second replica first, as a Service may send it.
        active.isolated.network.route(corral_port, [urlsplit(second).port or 0, corral_port])
        active.stop_agent()
        active.start_agent()

        def on_second() -> bool:
            with replica.log_path.open() as log:
                log.seek(logged)
                return f"cluster {active.id}: agent" in log.read()

        wait_for("the agent's tunnel held by the second replica", on_second, 60, interval=0.2)
        lease = _back_within_bound(api, management, active.id)
        nodes = f"/k8s/clusters/{active.id}/api/v1/nodes"
        # The first replica reaches the tunnel through the second's relay (TLS, verified), once
        # its own watch of the Leases has the second's: the operator's, which saw it first,
        # says nothing of it.
        wait_for("the first replica through the second's relay",
                 lambda: api.get(nodes).status == 200, 30)  # fmt: skip

        asked, asking = _keep_asking(api, nodes)
        try:
            wait_for("a request answered before the move", lambda: asked.answers, 30)
            os.kill(replica.pid, sig)
            gone = time.monotonic()
            moved = _back_within_bound(api, management, active.id, lease.spec.holder_identity)
            back = time.monotonic()
            wait_for("requests answered after the move",
                     lambda: [a for a in asked.answers if a[0] > back + 1], 30)  # fmt: skip
        finally:
            asked.stop.set()
            asking.join(35)
        relay = moved.metadata.annotations[names.ANNOTATION_TUNNEL_RELAY]
        assert relay != lease.metadata.annotations[names.ANNOTATION_TUNNEL_RELAY]
        # Before the replica went and once the tunnel is taken again, every request got
        # through. Between, a request is refused with 503 (the cluster's agent is not
        # connected, or its holder's relay does not answer), which a client retries; one in
        # flight at the kill may be cut instead. Never another error.
        assert all(s == 200 for _, done, s in asked.answers if done < gone), asked.answers
        assert all(s == 200 for began, _, s in asked.answers if began > back), asked.answers
        assert {status for *_, status in asked.answers} <= {200, 503, CUT}, asked.answers
        # No request hangs on a replica that is going, and the gap stays within the bound.
        assert all(done - began <= ANSWERED_WITHIN for began, done, _ in asked.answers)
        assert back - gone <= LOST_WITHIN, f"the cluster back {back - gone:.1f}s after"
    finally:
        active.isolated.network.route(corral_port, [corral_port])
        stack.remove_apiserver_replica(second)
    # Nothing the user made is lost: the workload is still there, active, through the first.
    base = f"/v3/projects/{workload['project']}/workloads/{workload['workload']}"
    assert api.get(base).body["state"] == "active"


def test_a_cluster_imported_by_kubeconfig_switches_to_its_agent(
    api: Api, stack: Environment, add_downstream: Callable[..., ControlPlane], devkube: Path,
    management: k8s.ApiClient, tmp_path: Path,
) -> None:  # fmt: skip
    """The same way as a new cluster: the cluster's default registration token, its command
    run there, the agent started. From then on corral reaches the cluster through the tunnel
    only, and deleting the cluster removes both what the import and the manifest made."""
    plane = add_downstream("switched", 1)
    config = base64.b64encode(plane.kubeconfig_path.read_bytes()).decode()
    made = api.post("/v3/clusters", {"type": "cluster", "name": "switched",
                                     "importedConfig": {"kubeConfig": config}})  # fmt: skip
    assert made.status == 201, made.body
    cluster_id = made.body["id"]
    wait_for("the imported cluster active", lambda: _state(api, cluster_id) == "active", 60)
    listed = api.get(f"/v3/clusterregistrationtokens?clusterId={cluster_id}").body["data"]
    shown = {t["name"]: t["insecureCommand"] for t in listed}["default-token"]
    applied = run_registration(shown, devkube, plane, tmp_path)
    assert applied.returncode == 0, applied.stderr

    def kubectl(*args: str) -> list[str]:
        return [str(devkube), "kubectl", f"--kubeconfig={plane.kubeconfig_path}", *args]

    env = agent_environment(kubectl, plane, tmp_path)

    def start_agent() -> subprocess.Popen[bytes]:
        with (tmp_path / "agent.log").open("ab") as log:
            return subprocess.Popen([sys.executable, "-m", "corral.agent"], env=env, stdout=log,
                                    stderr=subprocess.STDOUT)  # fmt: skip

    def deployed() -> bool:
        # Not only True: a kubeconfig import is AgentDeployed (CredentialAccepted) already.
        condition = _conditions(api, cluster_id).get("AgentDeployed", ("", "", ""))
        return condition[:2] == ("True", "AgentConnected")

    agent = start_agent()
    try:
        wait_for("the agent connected", deployed, 60, interval=0.5)
        credential = k8s.CoreV1Api(management).read_namespaced_secret(
            f"{cluster_id}-credential", "svc-system"
        )
        assert base64.b64decode(credential.data["transport"]) == b"tunnel"
        assert _state(api, cluster_id) == "active"
    finally:
        agent.terminate()
        agent.wait(10)
    # Through the tunnel only: without the agent, the cluster is unavailable.
    wait_for("Ready False AgentDisconnected",
             lambda: _conditions(api, cluster_id).get("Ready", ("",))[:2]
             == ("False", "AgentDisconnected"), 20, interval=0.5)  # fmt: skip

    agent = start_agent()
    try:
        wait_for("the cluster active again", lambda: _state(api, cluster_id) == "active", 30,
                 interval=0.5)  # fmt: skip
        assert api.delete(f"/v3/clusters/{cluster_id}").status in (200, 204)

        def removed() -> bool:
            listed = subprocess.run(kubectl("get", "namespaces,clusterrolebindings", "-o", "name"),
                                    capture_output=True, text=True, timeout=KUBECTL_TIMEOUT,
                                    check=True).stdout.splitlines()  # fmt: skip
            left = {"namespace/svc-system", f"namespace/{manifest.NAMESPACE}",
                    "clusterrolebinding.rbac.authorization.k8s.io/corral",
                    f"clusterrolebinding.rbac.authorization.k8s.io/{manifest.NAME}"}  # fmt: skip
            return not left & set(listed)

        wait_for("what the import and the manifest made removed", removed, 90, interval=0.5)
    finally:
        agent.terminate()
        agent.wait(10)


def test_deleting_the_cluster_removes_the_agent_and_revokes_its_credential(
    api: Api, active: Registered, devkube: Path
) -> None:
    """Runs last: the cluster goes. What the manifest made is removed through the tunnel,
    then the agent's credential is revoked: its tunnel is closed and a dial is refused."""
    assert api.delete(f"/v3/clusters/{active.id}").status in (200, 204)

    def removed() -> bool:
        names = subprocess.run(
            active.isolated.kubectl(devkube, "get", "namespaces,clusterrolebindings", "-o", "name"),
            capture_output=True, text=True, timeout=KUBECTL_TIMEOUT, check=True,
        ).stdout.splitlines()  # fmt: skip
        return f"namespace/{manifest.NAMESPACE}" not in names and (
            f"clusterrolebinding.rbac.authorization.k8s.io/{manifest.NAME}" not in names
        )

    wait_for("what the manifest made removed from the cluster", removed, 90, interval=0.5)
    wait_for("the cluster gone from corral",
             lambda: api.get(f"/v3/clusters/{active.id}").status == 404, 60)  # fmt: skip

    def refused_again() -> bool:
        log = active.agent_log.read_text()
        closed = f"the tunnel to corral ended (close code {handshake.CLOSE_REVOKED})" in log
        return closed and "corral refused the agent with HTTP 401" in log

    wait_for("the agent's tunnel closed and its dial refused", refused_again, 30, interval=0.5)
    credential = active.agent_env["CORRAL_AGENT_CREDENTIAL"]
    assert credential not in active.agent_log.read_text()
    answer = api.get(handshake.PATH, auth=False,
                     headers={"Authorization": f"Bearer {active.id}:{credential}"})  # fmt: skip
    assert answer.status == 401, answer.body
