"""Existing machines added over SSH (`customConfig`): corral connects to a real sshd running in
a machine of the local cloud (its own namespaces and containerd), records its host key, checks
containerd and runs the node command there; every way this can go wrong gives its
`Provisioned` reason, and deleting the node leaves nothing behind: no record, no key, nothing
on the machine.

The cluster's control plane is not made here (no hosted control planes), so the installer
runs, downloads from corral, registers with the machine's own token and is refused (422: the
cluster is not Ready): what is proved is that the node command ran on the machine as root, its
failure was reported with its last lines, and its uninstall left the machine clean. The join
itself is tests/e2e/test_real_machines.py's.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.api import names
from corral.devenv import network
from corral.devenv.environment import Environment
from corral.devenv.host import HostNotReady, check_host
from corral.devenv.machine import Machine
from corral.devenv.waiting import wait_for
from corral.operator.management.sshmachines import RETRY_MAX

from . import hoststate
from .api import Api
from .conftest import stack_options

GROUP, VERSION = names.GROUP, names.VERSION
# The operator's first retries come after 10 s and 20 s (sshmachines.RETRY_FIRST): a first
# outcome is seen within this; a later one may wait for a retry as long as RETRY_MAX.
CONDITION_TIMEOUT = 90.0
RETRIED_TIMEOUT = RETRY_MAX + 60.0
GONE_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    """The management cluster with one real node, corral, and the local cloud; the host is
    compared before it starts and after it stops."""
    try:
        check_host()
    except HostNotReady as exc:
        pytest.fail(f"this host cannot run machines: {exc}")
    before = hoststate.snapshot()
    root = tmp_path_factory.mktemp("ssh")
    options = stack_options(root, devkube, downstream_clusters=0, real_nodes=1)
    with Environment(options) as stack:
        yield stack
    assert hoststate.snapshot() == before


@pytest.fixture(scope="module")
def api(env: Environment) -> Api:
    return Api(env.api_url, ssl.create_default_context(cafile=str(env.ca_path)), env.admin_token)


@pytest.fixture(scope="module")
def crs(env: Environment) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(env.management_kubeconfig)))


@pytest.fixture(scope="module")
def core(env: Environment) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))


@pytest.fixture(scope="module")
def cluster(api: Api) -> str:
    config = {"kubernetesVersion": "v1.36.3+k3s1"}
    created = api.post("/v3/clusters", {"type": "cluster", "name": "over-ssh", "k3sConfig": config})
    assert created.status == 201, created.body
    return str(created.body["id"])


@pytest.fixture(scope="module")
def keys() -> dict[str, tuple[str, str]]:
    """Two SSH key pairs (private, public): the machines let `given` in, never `other`."""
    pairs = {}
    for name in ("given", "other"):
        key = ed25519.Ed25519PrivateKey.generate()
        private = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())  # fmt: skip
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                               serialization.PublicFormat.OpenSSH)  # fmt: skip
        pairs[name] = (private.decode(), public.decode())
    return pairs


@pytest.fixture(scope="module")
def machines(env: Environment) -> Iterator[list[Machine]]:
    """Machines kept to the module's end, so that none takes the address of one just removed:
    a machine made at once on a removed one's address sometimes did not answer SSH for 30 s
    (machine.start_sshd timed out)."""
    made: list[Machine] = []
    yield made
    for machine in made:
        env.cloud.remove(machine.name)


def sshable(env: Environment, machines: list[Machine], name: str, public_key: str) -> Machine:
    machine = env.cloud.create(name, name)
    machines.append(machine)
    machine.start_sshd(public_key)
    return machine


def add(api: Api, cluster: str, hostname: str, address: str, key: str) -> str:
    made = api.post("/v3/nodes", {"type": "node", "clusterId": cluster,
                                  "requestedHostname": hostname,
                                  "customConfig": {"address": address, "sshKey": key}})  # fmt: skip
    assert made.status == 201, made.body
    assert "sshKey" not in made.body["customConfig"]
    return str(made.body["id"]).split(":")[1]


def record(crs: k8s.CustomObjectsApi, cluster: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = crs.get_namespaced_custom_object(GROUP, VERSION, cluster,
                                                                 "nodes", name)  # fmt: skip
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def provisioned(
    crs: k8s.CustomObjectsApi, cluster: str, name: str, reason: str,
    timeout: float = CONDITION_TIMEOUT,
) -> dict[str, Any]:  # fmt: skip
    """The record once its `Provisioned` is False with `reason`: the condition."""

    def probe() -> dict[str, Any] | None:
        found = record(crs, cluster, name) or {}
        for cond in (found.get("status") or {}).get("conditions") or []:
            if cond["type"] == "Provisioned" and (cond["status"], cond["reason"]) == (
                "False",
                reason,
            ):
                return dict(cond)
        return None

    return wait_for(f"{name}: Provisioned False {reason}", probe, timeout)


def host_key(crs: k8s.CustomObjectsApi, cluster: str, name: str) -> str:
    annotations = (record(crs, cluster, name) or {})["metadata"].get("annotations") or {}
    return str(annotations.get(names.ANNOTATION_SSH_HOST_KEY, ""))


def fingerprint(openssh_key: str) -> str:
    return str(asyncssh.import_public_key(openssh_key).get_fingerprint("sha256"))


def remove_and_check_nothing_is_left(
    api: Api, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api, cluster: str, name: str,
    machine: Machine | None,
) -> None:  # fmt: skip
    assert api.delete(f"/v3/clusters/{cluster}/nodes/{name}").status == 204
    wait_for(f"{name} gone", lambda: record(crs, cluster, name) is None, GONE_TIMEOUT)
    secret = names.ssh_key_secret_name(cluster, name)
    assert not core.list_namespaced_secret(
        names.SYSTEM_NAMESPACE, field_selector=f"metadata.name={secret}"
    ).items
    tokens = crs.list_namespaced_custom_object(GROUP, VERSION, cluster,
                                               "clusterregistrationtokens")["items"]  # fmt: skip
    assert not [t for t in tokens if t["spec"].get("machine") == name]
    if machine is not None:
        for path in ("var/lib/corral-node", "usr/local/bin/corral-node-uninstall.sh",
                     "opt/cni/bin/bridge"):  # fmt: skip
            assert not (machine.rootfs / path).exists(), path


def test_a_wrong_key_is_authentication_failed_and_nothing_is_left(
    env: Environment, api: Api, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api, cluster: str,
    keys: dict[str, tuple[str, str]], machines: list[Machine],
) -> None:  # fmt: skip
    machine = sshable(env, machines, "wrong-key", keys["given"][1])
    name = add(api, cluster, "wrong-key", machine.address, keys["other"][0])
    condition = provisioned(crs, cluster, name, "AuthenticationFailed")
    assert machine.address in condition["message"] and "root" in condition["message"]
    # The key is nowhere in what the record shows.
    shown = api.get(f"/v3/clusters/{cluster}/nodes/{name}")
    assert keys["other"][0].splitlines()[1] not in str(shown.body)
    # Only a connection that got in records a host key.
    assert host_key(crs, cluster, name) == ""
    remove_and_check_nothing_is_left(api, crs, core, cluster, name, machine)


def test_an_unreachable_address_is_unreachable_and_nothing_is_left(
    api: Api, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api, cluster: str,
    keys: dict[str, tuple[str, str]],
) -> None:  # fmt: skip
    # An address of the machines' range that no machine has.
    address = network.machine_address(network.MAX_MACHINES - 1)
    name = add(api, cluster, "nowhere", address, keys["given"][0])
    condition = provisioned(crs, cluster, name, "Unreachable")
    assert f"{address}:22" in condition["message"]
    remove_and_check_nothing_is_left(api, crs, core, cluster, name, None)


def test_a_machine_without_containerd_then_with_another_host_key(
    env: Environment, api: Api, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api, cluster: str,
    keys: dict[str, tuple[str, str]], machines: list[Machine],
) -> None:  # fmt: skip
    machine = sshable(env, machines, "no-containerd", keys["given"][1])
    stop = (
        "kill $(pidof containerd); while pidof containerd; do sleep 0.1; done; "
        "rm -f /run/containerd/containerd.sock"
    )
    stopped = machine.exec(["sh", "-c", stop])
    assert stopped.rc == 0, stopped.stderr
    name = add(api, cluster, "no-containerd", machine.address, keys["given"][0])
    condition = provisioned(crs, cluster, name, "ContainerdMissing")
    assert "/run/containerd/containerd.sock" in condition["message"]
    # The first connection recorded the key the machine's sshd presents.
    recorded = host_key(crs, cluster, name)
    served = (machine.rootfs / "etc/ssh/ssh_host_ed25519_key.pub").read_text()
    assert recorded and fingerprint(recorded) == fingerprint(served)

    # The machine is replaced at its address: another host key. Nothing more runs there.
    replaced = machine.exec(["sh", "-c", "kill $(cat /run/sshd.pid); "
                                         "rm -f /etc/ssh/ssh_host_ed25519_key*"])  # fmt: skip
    assert replaced.rc == 0, replaced.stderr
    wait_for("sshd stopped", lambda: not (machine.rootfs / "run/sshd.pid").exists() or None, 10)
    new = machine.start_sshd(keys["given"][1])
    assert new != fingerprint(recorded)
    changed = provisioned(crs, cluster, name, "HostKeyChanged", RETRIED_TIMEOUT)
    assert fingerprint(recorded) in changed["message"] and new in changed["message"]
    assert host_key(crs, cluster, name) == recorded

    # Deleting it cannot uninstall (the key is refused): said in an event, and it goes anyway.
    remove_and_check_nothing_is_left(api, crs, core, cluster, name, machine)

    # kopf posts events from a queue of its own, so the event may land after the Node is gone.
    def uninstall_failed() -> bool:
        events = core.list_namespaced_event(cluster, field_selector=f"involvedObject.name={name}")
        return any(e.reason == "UninstallFailed" and "HostKeyChanged" in e.message
                   for e in events.items)  # fmt: skip

    wait_for("the UninstallFailed event", uninstall_failed, CONDITION_TIMEOUT)


def test_the_node_command_runs_on_the_machine_and_a_failed_install_is_undone(
    env: Environment, api: Api, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api, cluster: str,
    keys: dict[str, tuple[str, str]], machines: list[Machine],
) -> None:  # fmt: skip
    machine = sshable(env, machines, "installed", keys["given"][1])
    name = add(api, cluster, "installed", machine.address, keys["given"][0])
    condition = provisioned(crs, cluster, name, "InstallFailed")
    # The machine downloaded the installer from corral (its key pinned, its CA checked) and
    # registered with the machine's own token, which corral accepted (401 otherwise): the
    # cluster is not Ready, so the registration was refused, and the installer said so.
    assert "registration refused (422)" in condition["message"], condition
    assert "not provisioned and Ready" in condition["message"], condition
    assert host_key(crs, cluster, name)
    # The token goes with the failure; the key stays for the next try.
    tokens = crs.list_namespaced_custom_object(GROUP, VERSION, cluster,
                                               "clusterregistrationtokens")["items"]  # fmt: skip
    assert not [t for t in tokens if t["spec"].get("machine") == name]
    secret = core.read_namespaced_secret(names.ssh_key_secret_name(cluster, name),
                                         names.SYSTEM_NAMESPACE)  # fmt: skip
    assert base64.b64decode(secret.data[names.SSH_KEY_FIELD]).decode() == keys["given"][0]
    remove_and_check_nothing_is_left(api, crs, core, cluster, name, machine)
    # Neither the key nor the node command (which holds the machine's token) is logged.
    log = (env.root / "logs" / "operator.log").read_text()
    assert "--token" not in log
    assert keys["given"][0].splitlines()[1] not in log
