"""A provisioned cluster whose workers are real machines (issue 23, docs/design/real-machines.md).

One k3s cluster, provisioned through /v3 on the management cluster's real node, gets real
machines of the local cloud by every path corral offers: the node command of its registration
token run on a machine as root, a node pool of the local cloud's executable driver, and a
machine added over SSH. Then, through /v3 only, what a platform team would do: a workload
spread over the machines, its NodePort answering on each, pods reaching each other across
machines, logs and execute, project isolation enforced between pods of two projects and
lifted again, a drain, a wrong or revoked token, a node binary whose checksum does not match
the catalog's, a pool machine that stops answering replaced, the autoscaler adding a real
machine for a pod that fits nowhere and taking it away again, a scale-down, and the machine
added over SSH uninstalled when its node is deleted. The cluster is shared across the module:
provisioning one takes a minute.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core import settings
from corral.core.api import ids, names
from corral.core.kube import joining
from corral.core.nodepools import autoscaling
from corral.core.provisioning import catalog
from corral.core.registration import tokens
from corral.devenv import host, images
from corral.devenv.environment import Environment
from corral.devenv.machine import Machine
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import set_setting, stack_options

PROVISION_TIMEOUT = 300.0
JOIN_TIMEOUT = 180.0
# The autoscaler's timers, lowered so that a scale-down follows within seconds of the load
# going; the delay after a scale-up outlasts a new machine's join, so the machine is not
# judged empty in the moment between its node turning Ready and the pod landing there.
AUTOSCALER_KNOBS = {settings.SCALE_DOWN_UNNEEDED_SETTING: "4",
                    settings.SCALE_DOWN_DELAY_AFTER_ADD_SETTING: "90"}  # fmt: skip
CAPACITY = autoscaling.CAPACITY_PREFIX
# The node controller's grace period (40 s) before it marks a silent node, then the pool's
# 5 s, then a new machine's join.
REPLACE_TIMEOUT = 300.0
VERSION = "v1.36.3"


@pytest.fixture(scope="module")
def env(
    tmp_path_factory: pytest.TempPathFactory, devkube: Path, netbins: Path
) -> Iterator[Environment]:
    options = stack_options(
        tmp_path_factory.mktemp("real-machines"),
        devkube,
        downstream_clusters=0,
        real_nodes=1,
        hosted_control_planes=True,
        netbins=netbins,
    )
    with Environment(options) as started:
        set_setting(started, "api-rate-limit-per-minute", "100000")
        yield started


@pytest.fixture(scope="module")
def api(env: Environment) -> Api:
    return Api(env.api_url, ssl.create_default_context(cafile=str(env.ca_path)), env.admin_token)


@pytest.fixture(scope="module")
def cluster(api: Api) -> str:
    created = api.post(
        "/v3/clusters",
        {"type": "cluster", "name": "real", "k3sConfig": {"kubernetesVersion": VERSION}},
    )
    assert created.status == 201, created.body
    cluster_id = str(created.body["id"])
    wait_for(
        f"cluster {cluster_id} active",
        lambda: api.get(f"/v3/clusters/{cluster_id}").body.get("state") == "active",
        PROVISION_TIMEOUT,
    )
    return cluster_id


def node_command(api: Api, cluster_id: str) -> str:
    tokens = wait_for(
        "the cluster's default registration token",
        lambda: api.get(f"/v3/clusterregistrationtokens?clusterId={cluster_id}").body["data"],
        60,
    )
    return str(tokens[0]["nodeCommand"])


def nodes_of(api: Api, cluster_id: str) -> dict[str, dict[str, Any]]:
    listed = api.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]
    return {n["requestedHostname"]: n for n in listed}


def ready_node(api: Api, cluster_id: str, hostname: str) -> dict[str, Any] | None:
    node = nodes_of(api, cluster_id).get(hostname)
    return node if node and node.get("state") == "active" else None


def run(machine: Machine, command: str) -> str:
    done = machine.exec(["sh", "-c", command], timeout=JOIN_TIMEOUT)
    assert done.rc == 0, (done.stdout + done.stderr).decode(errors="replace")[-4000:]
    return done.stdout.decode(errors="replace")


@pytest.fixture(scope="module")
def joined(env: Environment, api: Api, cluster: str) -> Machine:
    """A machine that joined by the node command, run as root on it."""
    machine = env.cloud.create("joined", hostname="joined")
    began = time.monotonic()
    run(machine, node_command(api, cluster))
    wait_for("node joined Ready", lambda: ready_node(api, cluster, "joined"), JOIN_TIMEOUT)
    print(f"node command run → Node Ready: {time.monotonic() - began:.1f}s")
    return machine


def test_a_machine_joins_by_the_node_command_and_walks_to_ready(
    api: Api, cluster: str, joined: Machine
) -> None:
    node = nodes_of(api, cluster)["joined"]
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    for kind in ("Initialized", "Provisioned", "Registered", "Ready"):
        assert conditions.get(kind) == "True", (kind, node["status"]["conditions"])
    assert address_of(node) == joined.address
    assert node["worker"] is True


def address_of(node: dict[str, Any]) -> str:
    addresses = node["status"]["internalNodeStatus"]["addresses"]
    return next(a["address"] for a in addresses if a["type"] == "InternalIP")


@pytest.fixture(scope="module")
def kubeconfig(api: Api, env: Environment, cluster: str, tmp_path_factory: pytest.TempPathFactory
               ) -> Path:  # fmt: skip
    """The cluster as kubectl sees it through corral's proxy (generateKubeconfig)."""
    answer = api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig", {})
    assert answer.status == 200, answer.body
    config = yaml.safe_load(base64.b64decode(answer.body["config"]))
    for entry in config["clusters"]:
        entry["cluster"]["certificate-authority-data"] = base64.b64encode(
            env.ca_path.read_bytes()
        ).decode()
    path = tmp_path_factory.mktemp("kubeconfig") / "config"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def downstream(kubeconfig: Path) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(kubeconfig)))


def kubectl(env: Environment, kubeconfig: Path, *args: str, stdin: str = "") -> str:
    done = subprocess.run(
        [str(env.options.devkube), "kubectl", f"--kubeconfig={kubeconfig}",
         f"--cache-dir={kubeconfig.parent / 'cache'}", *args],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_pod_network_runs_on_the_machine(downstream: k8s.CoreV1Api, joined: Machine) -> None:
    def running() -> set[str]:
        pods = downstream.list_namespaced_pod("kube-system").items
        return {
            p.metadata.labels.get("app", "")
            for p in pods
            if p.spec.node_name == "joined" and p.status.phase == "Running"
        }

    wait_for("flannel and the enforcer running", lambda: {"kube-flannel", "kube-router"}
             <= running(), JOIN_TIMEOUT)  # fmt: skip
    conflist = joined.rootfs / "etc" / "cni" / "net.d" / "10-flannel.conflist"
    assert json.loads(conflist.read_text())["plugins"][0]["type"] == "bridge"


@pytest.fixture(scope="module")
def pooled(env: Environment, api: Api, cluster: str) -> dict[str, Any]:
    """A node pool of the local cloud's executable driver, one machine."""
    driver = api.post("/v3/nodedrivers", {
        "type": "nodeDriver", "name": "localcloud", "url": f"file://{env.local_cloud_driver}",
        "checksum": env.local_cloud_checksum, "active": True})  # fmt: skip
    assert driver.status == 201, driver.body
    wait_for(
        "the local cloud driver active",
        lambda: api.get("/v3/nodedrivers/localcloud").body["state"] == "active",
        60,
    )
    template = api.post("/v3/nodetemplates", {"name": "machine", "localcloudConfig": {}})
    assert template.status == 201, template.body
    pool = api.post("/v3/nodepools", {
        "type": "nodePool", "clusterId": cluster, "hostnamePrefix": "pool", "quantity": 1,
        "worker": True, "nodeTemplateName": template.body["id"]})  # fmt: skip
    assert pool.status == 201, pool.body
    began = time.monotonic()
    wait_for("pool's machine Ready", lambda: ready_node(api, cluster, "pool1"), JOIN_TIMEOUT)
    print(f"pool machine created → Node Ready: {time.monotonic() - began:.1f}s")
    return dict(pool.body)


def test_a_pool_of_the_local_cloud_makes_a_real_worker(
    env: Environment, api: Api, cluster: str, pooled: dict[str, Any]
) -> None:
    node = nodes_of(api, cluster)["pool1"]
    assert node["nodePoolId"] == pooled["id"]
    assert address_of(node) in {m.address for m in env.cloud.machines() if m.hostname == "pool1"}


@dataclass
class SshMachine:
    machine: Machine
    node: str  # its Node record's name in the cluster's namespace


def ssh_key_pair() -> tuple[str, str]:
    """A new ed25519 key: its private half (OpenSSH PEM) and its public line."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()  # fmt: skip
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()  # fmt: skip
    return private, public


def add_over_ssh(api: Api, cluster: str, machine: Machine, private_key: str) -> str:
    """Adds `machine` by its address and key (spec 2.4 customConfig): its node record's name."""
    added = api.post("/v3/nodes", {"type": "node", "clusterId": cluster,
                                   "requestedHostname": machine.hostname,
                                   "customConfig": {"address": machine.address,
                                                    "sshKey": private_key}})  # fmt: skip
    assert added.status == 201, added.body
    assert "sshKey" not in json.dumps(added.body["customConfig"])
    return str(added.body["id"]).split(":")[1]


@pytest.fixture(scope="module")
def ssh_added(env: Environment, api: Api, cluster: str) -> SshMachine:
    """A machine with containerd and sshd, added by its address and key (spec 2.4
    customConfig): corral connects over SSH and runs the installer with a token of its own."""
    private, public = ssh_key_pair()
    machine = env.cloud.create("sshjoin", hostname="sshjoin")
    machine.start_sshd(public)
    node = add_over_ssh(api, cluster, machine, private)

    def joined() -> dict[str, Any] | None:
        node = nodes_of(api, cluster).get("sshjoin")
        provisioned = [c for c in (node or {}).get("status", {}).get("conditions", [])
                       if c["type"] == "Provisioned"]  # fmt: skip
        if provisioned and provisioned[0]["status"] == "False":
            raise AssertionError(provisioned[0])
        return node if node and node.get("state") == "active" else None

    wait_for("the machine added over SSH Ready", joined, JOIN_TIMEOUT)
    return SshMachine(machine, node)


def test_a_machine_added_over_ssh_joins_with_its_own_address(
    api: Api, cluster: str, ssh_added: SshMachine
) -> None:
    node = nodes_of(api, cluster)["sshjoin"]
    assert address_of(node) == ssh_added.machine.address
    assert node["worker"] is True
    assert (ssh_added.machine.rootfs / "usr/local/bin/corral-node-uninstall.sh").exists()


PAGE = "served-by-a-real-machine"
WEB_CONTAINER = {
    "name": "web",
    "image": images.BUSYBOX_IMAGE,
    "imagePullPolicy": "Never",
    "command": ["/bin/sh", "-c", f"trap 'exit 0' TERM; mkdir -p /www; echo {PAGE} > "
                "/www/index.html; echo serving; httpd -f -p 8080 -h /www & wait"],
    "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
}  # fmt: skip


@dataclass
class Place:
    project: str
    namespace: str


def place(api: Api, cluster: str) -> Place:
    project = api.post("/v3/projects", {"type": "project", "name": f"p-{secrets.token_hex(3)}",
                                        "clusterId": cluster})  # fmt: skip
    assert project.status == 201, project.body
    namespace = api.post(f"/v3/clusters/{cluster}/namespaces", {
        "type": "namespace", "name": f"ns-{secrets.token_hex(3)}",
        "projectId": project.body["id"]})  # fmt: skip
    assert namespace.status == 201, namespace.body
    return Place(project.body["id"], namespace.body["name"])


def pods_of(api: Api, where: Place, wid: str) -> list[dict[str, Any]]:
    listed = api.get(f"/v3/projects/{where.project}/pods?workloadId={wid}").body["data"]
    return [p for p in listed if p.get("state") == "running"]


@pytest.fixture(scope="module")
def web(
    api: Api, cluster: str, joined: Machine, pooled: dict[str, Any], ssh_added: SshMachine
) -> tuple[Place, str]:
    """A workload on every machine (a DaemonSet, made through /v3) in a project of its own."""
    where = place(api, cluster)
    created = api.post(f"/v3/projects/{where.project}/workloads", {
        "name": "web", "namespaceId": where.namespace, "workloadType": "daemonSet",
        "containers": [WEB_CONTAINER]})  # fmt: skip
    assert created.status == 201, created.body
    wid = str(created.body["id"])
    wait_for("a web pod on each machine", lambda: len(pods_of(api, where, wid)) == 3, JOIN_TIMEOUT)
    return where, wid


def execute(api: Api, where: Place, pod: str, command: str) -> dict[str, Any]:
    ran = api.post(f"/v3/projects/{where.project}/pods/{pod}?action=execute",
                   {"command": ["sh", "-c", command]})  # fmt: skip
    assert ran.status == 200, ran.body
    return dict(ran.body)


def fetch(address: str, port: int) -> str:
    return f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {address} {port}"


def test_a_nodeport_answers_on_every_machine_with_the_container_s_page(
    env: Environment, kubeconfig: Path, web: tuple[Place, str]
) -> None:
    where, _ = web
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": where.namespace},
        "spec": {"type": "NodePort", "selector": {"workload.svc.io/workloadselector":
                                                   f"daemonset-{where.namespace}-web"},
                 "ports": [{"port": 80, "targetPort": 8080}]}}  # fmt: skip
    kubectl(env, kubeconfig, "apply", "-f", "-", stdin=json.dumps(service))
    port = int(kubectl(env, kubeconfig, "-n", where.namespace, "get", "service", "web",
                       "-o", "jsonpath={.spec.ports[0].nodePort}"))  # fmt: skip
    for machine in env.cloud.machines():
        page = wait_for(f"NodePort on {machine.hostname}",
                        lambda m=machine: _get(f"http://{m.address}:{port}/"), 60)  # fmt: skip
        assert PAGE in page


def _get(url: str) -> str | None:
    with urllib.request.urlopen(url, timeout=3) as answer:
        return str(answer.read().decode())


def test_pods_on_different_machines_reach_each_other(api: Api, web: tuple[Place, str]) -> None:
    where, wid = web
    first, second = pods_of(api, where, wid)[:2]
    assert first["nodeId"] != second["nodeId"]
    answer = execute(api, where, first["id"], fetch(second["podIp"], 8080))
    assert PAGE in answer["stdout"], answer


def test_logs_and_execute_return_the_container_s_real_output(
    api: Api, web: tuple[Place, str]
) -> None:
    where, wid = web
    pod = pods_of(api, where, wid)[0]["id"]
    logs = api.get(f"/v3/projects/{where.project}/pods/{pod}/logs")
    assert logs.status == 200 and "serving" in logs.body, logs.body
    answer = execute(api, where, pod, "hostname; cat /www/index.html; exit 3")
    assert PAGE in answer["stdout"] and answer["exitCode"] == 3, answer


ISOLATION_TIMEOUT = 120.0


def reaches(api: Api, where: Place, pod: str, address: str) -> bool:
    """Whether `pod` (of `where`) gets the page of the web container at `address`."""
    return PAGE in execute(api, where, pod, fetch(address, 8080))["stdout"]


def test_project_isolation_is_enforced_between_real_machines_and_lifted(
    api: Api, cluster: str, web: tuple[Place, str]
) -> None:
    # Project A: web's pods, one on each machine. Project B: one pod of its own.
    a, a_workload = web
    b = place(api, cluster)
    created = api.post(f"/v3/projects/{b.project}/workloads", {
        "name": "other", "namespaceId": b.namespace, "scale": 1,
        "containers": [{**WEB_CONTAINER, "name": "other"}]})  # fmt: skip
    assert created.status == 201, created.body
    b_pod = wait_for("project B's pod running",
                     lambda: pods_of(api, b, str(created.body["id"])), JOIN_TIMEOUT)[0]  # fmt: skip
    a_pod, a_other = pods_of(api, a, a_workload)[:2]
    assert a_pod["nodeId"] != a_other["nodeId"]
    # Open before: what isolation refuses below is refused by the policies alone.
    assert reaches(api, b, b_pod["id"], a_pod["podIp"])
    assert reaches(api, a, a_pod["id"], b_pod["podIp"])

    turned_on = api.put(f"/v3/clusters/{cluster}", {"enableNetworkPolicy": True})
    assert turned_on.status == 200, turned_on.body
    try:
        # Without an enforcer on the machines, B keeps reaching A and this times out.
        wait_for("project B refused by project A's pods",
                 lambda: not any(reaches(api, b, b_pod["id"], p["podIp"])
                                 for p in (a_pod, a_other)), ISOLATION_TIMEOUT)  # fmt: skip
        wait_for("project A refused by project B's pod",
                 lambda: not reaches(api, a, a_pod["id"], b_pod["podIp"]),
                 ISOLATION_TIMEOUT)  # fmt: skip
        # Its own project's pod on the other machine is still reached.
        assert reaches(api, a, a_pod["id"], a_other["podIp"])
        assert reaches(api, a, a_other["id"], a_pod["podIp"])
    finally:
        turned_off = api.put(f"/v3/clusters/{cluster}", {"enableNetworkPolicy": False})
        assert turned_off.status == 200, turned_off.body
    wait_for("project B reaching project A again",
             lambda: reaches(api, b, b_pod["id"], a_pod["podIp"]), ISOLATION_TIMEOUT)  # fmt: skip
    wait_for("project A reaching project B again",
             lambda: reaches(api, a, a_pod["id"], b_pod["podIp"]), ISOLATION_TIMEOUT)  # fmt: skip


def test_a_drain_moves_the_pods_to_another_machine(
    api: Api, cluster: str, joined: Machine, pooled: dict[str, Any]
) -> None:
    where = place(api, cluster)
    created = api.post(f"/v3/projects/{where.project}/workloads", {
        "name": "moved", "namespaceId": where.namespace, "scale": 2,
        "containers": [{**WEB_CONTAINER, "name": "moved"}]})  # fmt: skip
    assert created.status == 201, created.body
    wid = str(created.body["id"])
    wait_for("two pods running", lambda: len(pods_of(api, where, wid)) == 2, JOIN_TIMEOUT)
    node = nodes_of(api, cluster)["joined"]
    drained = api.post(relative(node["actions"]["drain"]), {"deleteLocalData": True})
    assert drained.status == 200, drained.body
    try:
        moved = wait_for(
            "the pods on the other machines",
            lambda: (
                (p := pods_of(api, where, wid))
                and len(p) == 2
                and all(q["nodeId"] != "joined" for q in p)
                and p
            ),
            JOIN_TIMEOUT,
        )
        assert {p["nodeId"] for p in moved} <= {"pool1", "sshjoin"}
    finally:
        undone = api.post(relative(node["actions"]["uncordon"]), {})
        assert undone.status == 200, undone.body


def relative(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def run_refused(machine: Machine, command: str) -> str:
    done = machine.exec(["sh", "-c", command], timeout=JOIN_TIMEOUT)
    assert done.rc != 0, done.stdout.decode(errors="replace")
    return (done.stdout + done.stderr).decode(errors="replace")


def installed(machine: Machine) -> list[str]:
    """What the installer leaves on a machine, if anything."""
    places = ("var/lib/corral-node", "opt/cni/bin", "usr/local/bin/corral-node-uninstall.sh")
    return [p for p in places if (machine.rootfs / p).exists() and any(
        (machine.rootfs / p).iterdir() if (machine.rootfs / p).is_dir() else [True])]  # fmt: skip


# A token value of any kind (registration or machine), where it stands alone in a log line.
TOKEN_VALUE = re.compile(
    f"(?<![A-Za-z0-9])[{ids.ALPHABET}]{{{tokens.VALUE_LENGTH}}}(?![A-Za-z0-9])"
)


def provisioned_false(api: Api, cluster: str, hostname: str) -> dict[str, Any] | None:
    """The node's `Provisioned` condition once it is False; a node that gets installed fails."""
    node = nodes_of(api, cluster).get(hostname) or {}
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Provisioned":
            assert cond["status"] != "True", f"{hostname} was installed: {cond}"
            if cond["status"] == "False":
                return dict(cond)
    return None


# Before any test removes a machine: corral connects to this one over SSH, and a machine made
# at once on a removed one's address sometimes did not answer SSH for 30 s (the host still
# sent to the removed one; test_ssh_machines.py keeps its machines for the same reason).
def test_a_node_binary_whose_checksum_does_not_match_installs_nothing(
    env: Environment, api: Api, cluster: str, downstream: k8s.CoreV1Api, tmp_path: Path
) -> None:
    assets = env.node_assets
    assert assets is not None
    served = assets.directory / assets.files[catalog.KUBE_PROXY]
    catalogs = assets.sha256[served.name]
    other = b"#!/bin/sh\necho not kube-proxy\n"
    others = hashlib.sha256(other).hexdigest()
    # The served file is a hard link into the cache other environments use (and kubelet's
    # inode too): its directory entry is replaced, never written through, and put back.
    kept, replacement = tmp_path / "kept", tmp_path / "replacement"
    kept.hardlink_to(served)
    private, public = ssh_key_pair()
    try:
        replacement.write_bytes(other)
        replacement.replace(served)
        machine = env.cloud.create("badsum", hostname="badsum")
        machine.start_sshd(public)
        scratch_before = {p.name for p in (machine.rootfs / "tmp").iterdir()}
        node = add_over_ssh(api, cluster, machine, private)
        condition = wait_for("badsum: Provisioned False", lambda: provisioned_false(
            api, cluster, "badsum"), JOIN_TIMEOUT)  # fmt: skip
        message = condition["message"]
        assert condition["reason"] == "InstallFailed", condition
        # The machine registered and reached the downloads (its join credential was issued
        # in the cluster), and kube-proxy's digest stopped it.
        assert "downloading kube-proxy" in message, message
        assert f"kube-proxy has sha256 {others}, not {catalogs}: not installed" in message, message
        # The failed install's join credential is revoked before the failure is written (the
        # next attempt, at least 10 s later, gets a new one).
        accounts = downstream.list_namespaced_service_account(joining.JOIN_NAMESPACE).items
        assert joining.account_name(node) not in {a.metadata.name for a in accounts}
        # Before its files were written: nothing of the installer is on the machine, not even
        # its scratch folder of downloads.
        assert installed(machine) == []
        assert not {p.name for p in (machine.rootfs / "tmp").iterdir()} - scratch_before

        assert api.delete(f"/v3/clusters/{cluster}/nodes/{node}").status == 204
        wait_for("badsum gone from the cluster", lambda: "badsum" not in nodes_of(api, cluster),
                 JOIN_TIMEOUT)  # fmt: skip
        # Nothing of it stays in the cluster: no node, no join credential.
        assert "badsum" not in {n.metadata.name for n in downstream.list_node().items}
        accounts = downstream.list_namespaced_service_account(joining.JOIN_NAMESPACE).items
        assert joining.account_name(node) not in {a.metadata.name for a in accounts}
        assert installed(machine) == []
    finally:
        kept.replace(served)
        env.cloud.remove("badsum")
    # The machine's token was in the command corral ran over SSH: neither a token nor the key
    # is in a log.
    for log in ("operator", "apiserver"):
        text = (env.root / "logs" / f"{log}.log").read_text()
        assert "--token" not in text, log
        assert not TOKEN_VALUE.findall(text), log
        assert private.splitlines()[1] not in text, log


def test_a_wrong_or_revoked_registration_token_joins_nothing(
    env: Environment, api: Api, cluster: str
) -> None:
    command = node_command(api, cluster)
    token = command.split("--token ")[1].split()[0]
    machine = env.cloud.create("refused", hostname="refused")
    try:
        wrong = run_refused(machine, command.replace(token, "x" * len(token)))
        assert "401" in wrong or "Unauthorized" in wrong or "token" in wrong, wrong
        assert installed(machine) == []
        made = api.post("/v3/clusterregistrationtokens", {"clusterId": cluster})
        assert made.status == 201, made.body
        revoked_command = str(made.body["nodeCommand"])
        assert api.delete(f"/v3/clusterregistrationtokens/{made.body['id']}").status == 204
        revoked = run_refused(machine, revoked_command)
        assert "401" in revoked or "Unauthorized" in revoked or "token" in revoked, revoked
        assert installed(machine) == []
        assert "refused" not in nodes_of(api, cluster)
    finally:
        env.cloud.remove("refused")


def test_a_pool_machine_that_stops_answering_is_replaced(
    env: Environment, api: Api, cluster: str, pooled: dict[str, Any]
) -> None:
    # The machine's link goes down: its kubelet stops reporting, the cluster's node
    # controller marks it unreachable, and deleteNotReadyAfterSecs later the pool replaces it
    # with a new machine under the next name.
    lowered = api.put(f"/v3/nodepools/{pooled['id']}", {"deleteNotReadyAfterSecs": 5})
    assert lowered.status == 200, lowered.body
    (lost,) = [m for m in env.cloud.machines() if m.hostname == "pool1"]
    host.run(["ip", "link", "set", lost.veth, "down"])
    wait_for("pool2 Ready in place of pool1", lambda: ready_node(api, cluster, "pool2"),
             REPLACE_TIMEOUT)  # fmt: skip
    wait_for("pool1 gone from the cluster", lambda: "pool1" not in nodes_of(api, cluster),
             JOIN_TIMEOUT)  # fmt: skip
    wait_for("its machine removed",
             lambda: "pool1" not in {m.hostname for m in env.cloud.machines()},
             JOIN_TIMEOUT)  # fmt: skip
    assert api.get(f"/v3/nodepools/{pooled['id']}").body["quantity"] == 1


def pool_nodes(api: Api, cluster: str, pool: dict[str, Any]) -> set[str]:
    return {n for n, node in nodes_of(api, cluster).items() if node["nodePoolId"] == pool["id"]}


def test_the_autoscaler_adds_a_real_machine_for_a_pod_that_does_not_fit_and_takes_it_away(
    env: Environment, api: Api, cluster: str, kubeconfig: Path, pooled: dict[str, Any]
) -> None:
    # A machine of the local cloud has the host's cores; an executable driver cannot say so
    # before it makes one, so the pool carries upstream's capacity annotations, as with
    # cluster-autoscaler. The bounds are the CR's (kubectl), as /v3 node pools have none.
    cores = os.cpu_count() or 1
    crs = k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    pool_name = pooled["id"].split(":")[1]
    capacity = {f"{CAPACITY}cpu": str(cores), f"{CAPACITY}memory": "8Gi"}
    bounds = {"metadata": {"annotations": capacity},
              "spec": {"autoscalingMinSize": 1, "autoscalingMaxSize": 2}}  # fmt: skip
    crs.patch_namespaced_custom_object(names.GROUP, names.VERSION, cluster, "nodepools",
                                       pool_name, bounds)  # fmt: skip
    for name, value in AUTOSCALER_KNOBS.items():
        assert api.put(f"/v3/settings/{name}", {"value": value}).status == 200
    try:
        (first,) = pool_nodes(api, cluster, pooled)
        # Each pod asks for 60 % of a machine's cpu and selects the pool's machines by the
        # label they register with: one fits the pool's machine, the second fits no machine
        # there is.
        big = {"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "big", "namespace": "default"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "big"}},
                        "template": {"metadata": {"labels": {"app": "big"}}, "spec": {
                            "nodeSelector": {names.LABEL_NODE_POOL: pool_name},
                            "containers": [{"name": "big", "image": images.BUSYBOX_IMAGE,
                                            "imagePullPolicy": "Never",
                                            "command": ["sh", "-c", "trap 'exit 0' TERM; "
                                                        "sleep 1d & wait"],
                                            "resources": {"requests": {
                                                "cpu": f"{cores * 600}m"}}}]}}}}  # fmt: skip
        began = time.monotonic()
        kubectl(env, kubeconfig, "apply", "-f", "-", stdin=json.dumps(big))

        def running_on() -> list[str]:
            shown = kubectl(env, kubeconfig, "-n", "default", "get", "pods", "-l", "app=big",
                            "--field-selector=status.phase=Running",
                            "-o", "jsonpath={.items[*].spec.nodeName}")  # fmt: skip
            return shown.split()

        wait_for("both pods running, the second on a machine the autoscaler added",
                 lambda: len(running_on()) == 2, REPLACE_TIMEOUT)  # fmt: skip
        print(f"pending pod → running on a new real machine: {time.monotonic() - began:.1f}s")
        grown = pool_nodes(api, cluster, pooled)
        assert len(grown) == 2 and first in grown, grown
        (added,) = grown - {first}
        assert sorted(running_on()) == sorted([first, added])
        assert added in {m.hostname for m in env.cloud.machines()}
        assert api.get(f"/v3/nodepools/{pooled['id']}").body["quantity"] == 2

        # The wait after an add is there for the new machine to join and take its pod, which
        # it has: the scale-down need not sit out the rest of its 90 s.
        after_add = settings.SCALE_DOWN_DELAY_AFTER_ADD_SETTING
        assert api.put(f"/v3/settings/{after_add}", {"value": "1"}).status == 200
        kubectl(env, kubeconfig, "-n", "default", "delete", "deployment", "big")
        began = time.monotonic()
        wait_for("the pool back to its one machine",
                 lambda: len(pool_nodes(api, cluster, pooled)) == 1
                 and len([m for m in env.cloud.machines() if m.hostname in grown]) == 1,
                 REPLACE_TIMEOUT)  # fmt: skip
        print(f"load removed → pool back to one machine: {time.monotonic() - began:.1f}s")
        assert api.get(f"/v3/nodepools/{pooled['id']}").body["quantity"] == 1
    finally:
        for name in AUTOSCALER_KNOBS:
            api.put(f"/v3/settings/{name}", {"value": ""})
        unbounded = {"spec": {"autoscalingMinSize": None, "autoscalingMaxSize": None}}
        crs.patch_namespaced_custom_object(names.GROUP, names.VERSION, cluster, "nodepools",
                                           pool_name, unbounded)  # fmt: skip


def test_scaling_the_pool_down_removes_its_machine(
    env: Environment, api: Api, cluster: str, pooled: dict[str, Any]
) -> None:
    pool = pool_nodes(api, cluster, pooled)
    assert len(pool) == 1, pool
    scaled = api.put(f"/v3/nodepools/{pooled['id']}", {"quantity": 0})
    assert scaled.status == 200, scaled.body
    wait_for("the pool's node gone from the cluster",
             lambda: not pool & set(nodes_of(api, cluster)), JOIN_TIMEOUT)  # fmt: skip
    wait_for("its machine gone", lambda: not pool & {m.hostname for m in env.cloud.machines()},
             JOIN_TIMEOUT)  # fmt: skip


def test_deleting_the_machine_added_over_ssh_uninstalls_it(
    env: Environment, api: Api, cluster: str, ssh_added: SshMachine
) -> None:
    crs = k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    # Its registration token was used up when it joined.
    tokens = crs.list_namespaced_custom_object(names.GROUP, names.VERSION, cluster,
                                               "clusterregistrationtokens")["items"]  # fmt: skip
    assert not [t for t in tokens if t["spec"].get("machine") == ssh_added.node]
    assert api.delete(f"/v3/clusters/{cluster}/nodes/{ssh_added.node}").status == 204
    wait_for("sshjoin gone from the cluster", lambda: "sshjoin" not in nodes_of(api, cluster),
             JOIN_TIMEOUT)  # fmt: skip
    assert installed(ssh_added.machine) == []
