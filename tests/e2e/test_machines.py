"""Machines of the local cloud: Linux machines made of namespaces beside a real node of the
management cluster, each with its own containerd, files, hostname and address.

A machine runs a container with its own containerd, keeps what is written in it inside it,
answers SSH with the key it was given alone, reaches the other machines, the host, the
management cluster's Services and is reached by its pods; the local cloud's driver keeps the
executable contract of docs/drivers.md and registers through /v3/nodedrivers; and removing
machines leaves the host as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.server
import ipaddress
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.stream import stream

from corral.core import kubeconfig, pki
from corral.core.errors import Invalid
from corral.devenv import images, network
from corral.devenv.environment import Environment
from corral.devenv.host import CNI_PLUGINS, HostNotReady, check_host
from corral.devenv.machine import Machine
from corral.devenv.waiting import Timeout, wait_for
from corral.operator.drivers.executable import ExecutableDriver

from . import hoststate
from .api import Api
from .conftest import stack_options

PAGE = "served-by-a-management-pod"
WEB = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {
                "name": "web",
                "image": images.BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", f"trap 'exit 0' TERM; mkdir -p /www; "
                            f"echo {PAGE} > /www/index.html; httpd -f -p 8080 -h /www & wait"],
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
            }
        ]
    },
}  # fmt: skip
BRIDGE = {
    "cniVersion": "1.0.0",
    "name": "bridge",
    "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.200.0/24"}]]}}],
}  # fmt: skip
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web"},
    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    """The management cluster with one real node, corral, and the local cloud; the host is
    compared before it starts and after it stops, a machine still running then."""
    try:
        check_host()
    except HostNotReady as exc:
        pytest.fail(f"this host cannot run machines: {exc}")
    before = hoststate.snapshot()
    root = tmp_path_factory.mktemp("machines")
    options = stack_options(root, devkube, downstream_clusters=0, real_nodes=1)
    with Environment(options) as stack:
        yield stack
        # Left running: the environment's stop removes every machine of its cloud.
        stack.cloud.create("m-left-running")
    assert hoststate.snapshot() == before


@pytest.fixture(scope="module")
def api(env: Environment) -> Api:
    """The admin of this module's corral (the session's stack is not started here)."""
    return Api(env.api_url, ssl.create_default_context(cafile=str(env.ca_path)), env.admin_token)


@pytest.fixture(scope="module")
def core(env: Environment) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))


@pytest.fixture
def machines(env: Environment) -> Iterator[list[Machine]]:
    """Machines made for one test (append `env.cloud.create(...)`), removed after it."""
    made: list[Machine] = []
    yield made
    for machine in made:
        env.cloud.remove(machine.name)


def run(machine: Machine, *argv: str, stdin: bytes = b"") -> str:
    done = machine.exec(list(argv), stdin)
    assert done.rc == 0, (argv, done.stderr.decode())
    return done.stdout.decode()


def test_a_machine_runs_a_container_with_its_own_containerd_and_keeps_its_files(
    env: Environment, machines: list[Machine], tmp_path: Path
) -> None:
    runtime_paths = ("/var/lib/containerd", "/run/containerd", "/opt/containerd", "/etc/cni",
                     "/opt/cni")  # fmt: skip
    on_the_host = {path: Path(path).exists() for path in runtime_paths}
    machine = env.cloud.create("m-first", "first")
    machines.append(machine)
    assert machine.address == network.machine_address(0)

    # Its own PID namespace, hostname and address.
    processes = [line.split() for line in run(machine, "ps", "-e", "-o", "pid=,comm=").splitlines()]
    assert processes[0] == ["1", "catatonit"]
    assert {comm for _pid, comm in processes} == {"catatonit", "containerd", "ps"}
    assert run(machine, "hostname").strip() == "first"
    assert f"inet {machine.address}/24" in run(machine, "ip", "-4", "addr", "show", "eth0")

    # Its containerd, configured and reached where a real machine's is, runs a container.
    assert "/run/containerd/containerd.sock" in run(machine, "cat", "/etc/containerd/config.toml")
    archive = images.build_busybox(tmp_path).read_bytes()
    run(machine, "ctr", "-n", "k8s.io", "images", "import", "--base-name", "localhost/busybox",
        "-", stdin=archive)  # fmt: skip
    said = run(machine, "ctr", "-n", "k8s.io", "run", "--rm", images.BUSYBOX_IMAGE, "hello",
               "sh", "-c", "echo hello-from-$(hostname)")  # fmt: skip
    assert said.strip() == "hello-from-first"

    # What is written as root stays inside: the machine's folders are its own.
    written = ["/etc/corral-test", "/opt/cni/bin/corral-test", "/var/lib/corral-test",
               "/usr/local/bin/corral-test", "/root/corral-test", "/run/corral-test",
               "/var/log/corral-test"]  # fmt: skip
    for path in written:
        run(machine, "sh", "-c", f"echo inside > {path}")
    for path in written:
        assert not Path(path).exists(), path
        assert (machine.rootfs / path.lstrip("/")).read_text() == "inside\n"
    assert {path: Path(path).exists() for path in runtime_paths} == on_the_host
    # Outside them the host's file system is read-only: nothing written there reaches the host.
    refused = machine.exec(["sh", "-c", "echo outside > /usr/bin/corral-test"])
    assert refused.rc != 0 and b"Read-only file system" in refused.stderr
    assert not Path("/usr/bin/corral-test").exists()
    assert run(machine, "ls", "/etc/cni/net.d", "/opt/cni/bin").split() == [
        "/etc/cni/net.d:", "/opt/cni/bin:", "corral-test"
    ]  # fmt: skip


def test_sshd_answers_with_the_given_key_and_refuses_another(
    env: Environment, machines: list[Machine], tmp_path: Path
) -> None:
    machine = env.cloud.create("m-ssh", "sshable")
    machines.append(machine)
    for name in ("given", "other"):
        on_host("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name))
    fingerprint = machine.start_sshd((tmp_path / "given.pub").read_text())

    # The host key that answers on its address is the one start_sshd() reported.
    (tmp_path / "known_hosts").write_text(on_host("ssh-keyscan", "-t", "ed25519", machine.address))
    listed = on_host("ssh-keygen", "-l", "-E", "sha256", "-f", str(tmp_path / "known_hosts"))
    assert listed.split()[1] == fingerprint

    def ssh(key: str) -> subprocess.CompletedProcess[str]:
        argv = ["ssh", "-F", "/dev/null", "-i", str(tmp_path / key), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5",
                "-o", f"UserKnownHostsFile={tmp_path / 'known_hosts'}",
                f"root@{machine.address}", "hostname"]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)

    allowed = ssh("given")
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "sshable"), allowed.stderr
    refused = ssh("other")
    assert refused.returncode == 255
    assert "Permission denied (publickey)" in refused.stderr


def test_machines_reach_each_other_the_host_and_the_management_cluster(
    env: Environment, machines: list[Machine], core: k8s.CoreV1Api
) -> None:
    one = env.cloud.create("m-one", "one")
    two = env.cloud.create("m-two", "two")
    machines += [one, two]
    # `two` serves a page on the kubelet's port, as a hosted apiserver calls it.
    run(two, "sh", "-c", "mkdir -p /var/www && echo served-by-two > /var/www/index.html")
    run(two, "busybox", "httpd", "-p", f"{two.address}:10250", "-h", "/var/www")

    assert fetch(one, f"http://{two.address}:10250/") == "served-by-two"
    with host_page("served-by-the-host") as url:
        assert fetch(one, url) == "served-by-the-host"

    # The management cluster's Service range from a machine, and its pods to a machine.
    core.create_namespaced_pod("default", WEB)
    core.create_namespaced_service("default", SERVICE)
    try:
        wait_for("pod web Ready", lambda: ready(core.read_namespaced_pod("web", "default")), 60)
        ip = core.read_namespaced_service("web", "default").spec.cluster_ip
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(network.SERVICE_CIDR)
        # Once kube-proxy on the node has the new Service's rules.
        try:
            page = wait_for("the Service from a machine", lambda: answer(one, f"http://{ip}/"),
                            30)  # fmt: skip
        except Timeout as timeout:
            slices = k8s.DiscoveryV1Api(core.api_client).list_namespaced_endpoint_slice(
                "default", label_selector="kubernetes.io/service-name=web"
            )
            endpoints = [(e.addresses, e.conditions.ready) for s in slices.items
                         for e in s.endpoints or []]  # fmt: skip
            raise Timeout(f"{timeout}; the Service's endpoints: {endpoints}") from None
        assert page == PAGE
        # busybox's wget crashes here (static glibc); its nc does not.
        request = f'printf "GET / HTTP/1.0\\r\\n\\r\\n" | nc -w 5 {two.address} 10250'
        reply = stream(core.connect_get_namespaced_pod_exec, "web", "default",
                       command=["sh", "-c", request], stderr=True, stdin=False, stdout=True,
                       tty=False)  # fmt: skip
        assert reply.splitlines()[-1] == "served-by-two"
    finally:
        core.delete_namespaced_service("web", "default")
        core.delete_namespaced_pod("web", "default", grace_period_seconds=0)


def test_a_kubelet_installed_in_a_machine_keeps_its_pods_inside_the_machine(
    env: Environment, machines: list[Machine], core: k8s.CoreV1Api, devkube: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """What a node installer does, by hand: a kubelet with its defaults for paths and cgroups
    joins the management cluster from a machine, and its pods' cgroups are the machine's."""
    machine = env.cloud.create("m-kubelet", "kubelet-worker")
    machines.append(machine)
    assert env.management is not None
    ca = env.management.ca
    installed = machine.rootfs / "var/lib/corral-node"
    installed.mkdir()
    shutil.copy(devkube, machine.rootfs / "usr/local/bin/kubelet")
    for plugin in ("bridge", "host-local", "loopback"):
        shutil.copy(CNI_PLUGINS / plugin, machine.rootfs / "opt/cni/bin")
    (machine.rootfs / "etc/cni/net.d/10-bridge.conflist").write_text(json.dumps(BRIDGE))
    client = ca.issue_client("system:node:kubelet-worker", ["system:nodes"])
    credentials = kubeconfig.Credentials(client_cert=client.cert, client_key=client.key)
    config = kubeconfig.build("worker", env.management.server, ca.cert_pem, credentials)
    pki.write_private(installed / "kubelet.kubeconfig", kubeconfig.dump(config).encode())
    ca.issue_server("kubelet-worker", [machine.address]).write(installed, "serving")
    (installed / "ca.crt").write_bytes(ca.cert_pem)
    (installed / "kubelet.yaml").write_text(json.dumps(kubelet_config(machine.address)))
    archive = images.build_busybox(tmp_path).read_bytes()
    run(machine, "ctr", "-n", "k8s.io", "images", "import", "--base-name", "localhost/busybox",
        "-", stdin=archive)  # fmt: skip
    machine.spawn(["kubelet", "--config=/var/lib/corral-node/kubelet.yaml",
                   "--kubeconfig=/var/lib/corral-node/kubelet.kubeconfig",
                   f"--node-ip={machine.address}", "--hostname-override=kubelet-worker"],
                  "/var/log/kubelet.log")  # fmt: skip
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-a-machine"},
           "spec": {"nodeName": "kubelet-worker", "containers": [{
               "name": "c", "image": images.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
               "command": ["sh", "-c", "grep :memory: /proc/self/cgroup; trap 'exit 0' TERM; "
                           "sleep 3600 & wait"]}]}}  # fmt: skip
    core.create_namespaced_pod("default", pod)
    try:
        wait_for("pod on-a-machine Running",
                 lambda: core.read_namespaced_pod("on-a-machine", "default").status.phase
                 == "Running", 60)  # fmt: skip
        # Logs come from the machine's kubelet, through the management kube-apiserver.
        log = lambda: core.read_namespaced_pod_log("on-a-machine", "default")  # noqa: E731
        memory = wait_for("its log", log, 30)
        assert memory.strip().split(":", 2)[2].startswith("/kubepods/")
        inside = Path("/sys/fs/cgroup/memory") / machine.cgroup.lstrip("/") / "kubepods"
        assert inside.is_dir()
        assert not Path("/sys/fs/cgroup/memory/kubepods").exists()
    finally:
        core.delete_namespaced_pod("on-a-machine", "default", grace_period_seconds=0)
        core.delete_node("kubelet-worker")


def test_the_local_cloud_driver_keeps_the_executable_contract(env: Environment, api: Api) -> None:
    driver = ExecutableDriver("localcloud", env.local_cloud_driver)
    assert asyncio.run(driver.schema()) == {"fields": {}}

    with pytest.raises(Invalid, match=r"join\.command is missing"):
        drive(driver, "create", machine("m-nojoin"), join={"token": "x"})
    assert drive(driver, "state", machine("m-nojoin")) == {"exists": False}

    # create answers at once; the machine boots, runs the join command, and outlives the run.
    joining = "echo joined-as-$(hostname) > /var/lib/joined; echo done"
    created = drive(driver, "create", machine("m-driven", "driven"), join={"command": joining})
    assert created["phase"] == "Provisioning"
    again = drive(driver, "create", machine("m-driven", "driven"), join={"command": joining})
    assert again["addresses"] == created["addresses"]
    assert again["providerId"] == created["providerId"] == "corral-local://m-driven"
    running = wait_for("m-driven Running",
                       lambda: (s := drive(driver, "state", machine("m-driven")))["phase"]
                       == "Running" and s, 30)  # fmt: skip
    assert running["addresses"] == created["addresses"]
    driven = env.cloud.get("m-driven")
    assert driven is not None and driven.running()
    assert run(driven, "cat", "/var/lib/joined").strip() == "joined-as-driven"
    assert not Path("/var/lib/joined").exists()

    # A join command that fails makes a Failed machine, with the last line it printed.
    failing = "echo no containerd here >&2; exit 3"
    drive(driver, "create", machine("m-failing"), join={"command": failing})
    failed = wait_for("m-failing Failed",
                      lambda: (s := drive(driver, "state", machine("m-failing")))["phase"]
                      == "Failed" and s, 30)  # fmt: skip
    assert failed["message"] == "its join command exited with 3: no containerd here"

    for name in ("m-driven", "m-failing"):
        assert drive(driver, "remove", machine(name)) == {}
        assert drive(driver, "state", machine(name)) == {"exists": False}
        assert drive(driver, "remove", machine(name)) == {}
    assert env.cloud.machines() == []


def test_the_local_cloud_registers_through_nodedrivers_by_file_url(
    env: Environment, api: Api
) -> None:
    body = env.local_cloud_driver.read_bytes()
    assert hashlib.sha256(body).hexdigest() == env.local_cloud_checksum
    created = api.post("/v3/nodedrivers", {"type": "nodeDriver", "name": "localcloud",
                                           "url": f"file://{env.local_cloud_driver}",
                                           "checksum": env.local_cloud_checksum,
                                           "active": True})  # fmt: skip
    assert created.status == 201, created.body
    try:
        shown = wait_for("the local cloud driver active",
                         lambda: (b := api.get("/v3/nodedrivers/localcloud").body)["state"]
                         == "active" and b, 60)  # fmt: skip
        assert shown["status"]["schema"] == {"fields": {}}
    finally:
        assert api.delete("/v3/nodedrivers/localcloud").status == 204


def test_removing_machines_leaves_the_host_as_it_was(env: Environment) -> None:
    before = hoststate.snapshot()
    machine = env.cloud.create("m-gone", "gone")
    run(machine, "sh", "-c", "echo x > /etc/cni/net.d/10-test.conf")
    run(machine, "ctr", "-n", "k8s.io", "images", "ls")
    during = hoststate.snapshot()
    assert during["links"] != before["links"]  # its veth
    assert during["sysctls"] == before["sysctls"]
    assert during["iptables"] == before["iptables"]
    env.cloud.remove("m-gone")
    assert env.cloud.get("m-gone") is None
    assert not machine.dir.exists()
    assert hoststate.snapshot() == before


# -- helpers ---------------------------------------------------------------------------------


def machine(name: str, hostname: str | None = None) -> dict[str, Any]:
    return {"machine": {"name": name, "cluster": "c-m-test0000", "hostname": hostname or name}}


def drive(driver: ExecutableDriver, command: str, about: dict[str, Any], **extra: Any) -> Any:
    """Run the driver as the operator does (executable.py): its own session and empty
    environment, JSON on stdin, the time limit."""
    return asyncio.run(driver.run(command, {**about, "config": {}, "credential": {}, **extra}))


def kubelet_config(address: str) -> dict[str, Any]:
    """A kubelet's configuration with its defaults for paths and cgroups (cgroupRoot `/`),
    what this host needs (cgroup v1, no systemd, no negative OOM scores) and its TLS."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "address": address,
        "readOnlyPort": 0,
        "tlsCertFile": "/var/lib/corral-node/serving.crt",
        "tlsPrivateKeyFile": "/var/lib/corral-node/serving.key",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": "/var/lib/corral-node/ca.crt"},
        },
        "authorization": {"mode": "Webhook"},
        "makeIPTablesUtilChains": False,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "mergeDefaultEvictionSettings": False,
        "failSwapOn": False,
        "podCIDR": "10.244.200.0/24",
    }


def on_host(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


def fetch(machine: Machine, url: str) -> str:
    return run(machine, "curl", "-fsS", "--max-time", "5", url).strip()


def answer(machine: Machine, url: str) -> str:
    """The page at `url` from the machine; while nothing answers there, curl's complaint (a
    wait that times out shows the last: refused, no route, or no answer)."""
    done = machine.exec(["curl", "-fsS", "--max-time", "2", url])
    if done.rc != 0:
        raise ConnectionError(done.stderr.decode().strip() or f"curl exited with {done.rc}")
    return done.stdout.decode().strip()


def ready(pod: k8s.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@contextlib.contextmanager
def host_page(text: str) -> Iterator[str]:
    """An HTTP server on the host's bridge address serving `text`; its url."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer((network.HOST_ADDRESS, 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{network.HOST_ADDRESS}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
