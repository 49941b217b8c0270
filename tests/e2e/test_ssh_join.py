"""A machine added over SSH joins a provisioned cluster, and leaves it clean when deleted.

A k3s cluster whose control plane runs on the management cluster's real node, its version's
node files served at /assets/; a machine of the local cloud with containerd and sshd. corral
connects, installs with a registration token of the machine's own, and the machine's kubelet
registers its node; deleting the node uninstalls the machine over SSH and removes its node,
join credential, token and key. The node's `Ready` waits for the pod network, which is not
asserted here.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.api import names
from corral.core.kube.joining import JOIN_NAMESPACE, account_name
from corral.devenv.environment import Environment
from corral.devenv.machine import Machine
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import set_setting, stack_options

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = names.GROUP, names.VERSION
VERSION_OF_K3S = "v1.36.3+k3s1"
CLUSTER_TIMEOUT = 420.0
JOIN_TIMEOUT = 180.0
GONE_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    options = stack_options(tmp_path_factory.mktemp("ssh-join"), devkube, downstream_clusters=0,
                            real_nodes=1, hosted_control_planes=True,
                            netbins=ROOT / "tools" / "netbins")  # fmt: skip
    with Environment(options) as stack:
        set_setting(stack, "api-rate-limit-per-minute", "100000")
        yield stack


@pytest.fixture(scope="module")
def api(env: Environment) -> Api:
    return Api(env.api_url, ssl.create_default_context(cafile=str(env.ca_path)), env.admin_token)


@pytest.fixture(scope="module")
def crs(env: Environment) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(env.management_kubeconfig)))


@pytest.fixture
def machine(env: Environment) -> Iterator[Machine]:
    made = env.cloud.create("sshjoin", "sshjoin")
    yield made
    env.cloud.remove(made.name)


def downstream(api: Api, env: Environment, cluster: str, path: Path) -> k8s.ApiClient:
    """The cluster through corral's proxy, as kubectl with generateKubeconfig reaches it."""
    answer = api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig", {})
    assert answer.status == 200, answer.body
    config = yaml.safe_load(base64.b64decode(answer.body["config"]))
    for entry in config["clusters"]:
        entry["cluster"]["certificate-authority-data"] = base64.b64encode(
            env.ca_path.read_bytes()
        ).decode()
    path.write_text(yaml.safe_dump(config))
    return k8s_config.new_client_from_config(str(path))


def conditions(crs: k8s.CustomObjectsApi, cluster: str, name: str) -> dict[str, Any]:
    record = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "nodes", name)
    return {c["type"]: c for c in (record.get("status") or {}).get("conditions") or []}


def test_a_machine_added_over_ssh_joins_and_leaves_nothing_when_deleted(
    env: Environment, api: Api, crs: k8s.CustomObjectsApi, machine: Machine, tmp_path: Path
) -> None:
    config = {"kubernetesVersion": VERSION_OF_K3S}
    made = api.post("/v3/clusters", {"type": "cluster", "name": "joined", "k3sConfig": config})
    assert made.status == 201, made.body
    cluster = str(made.body["id"])
    wait_for(f"{cluster} active",
             lambda: api.get(f"/v3/clusters/{cluster}").body["state"] == "active",
             CLUSTER_TIMEOUT)  # fmt: skip

    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()  # fmt: skip
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()  # fmt: skip
    machine.start_sshd(public)
    added = api.post("/v3/nodes", {"type": "node", "clusterId": cluster,
                                   "requestedHostname": "sshjoin",
                                   "customConfig": {"address": machine.address,
                                                    "sshKey": private}})  # fmt: skip
    assert added.status == 201, added.body
    name = str(added.body["id"]).split(":")[1]

    # Installed over SSH, and the machine's kubelet registered its node.
    def joined() -> dict[str, Any] | None:
        found = conditions(crs, cluster, name)
        if found.get("Provisioned", {}).get("status") == "False":
            raise AssertionError(found["Provisioned"])
        registered = found.get("Registered", {}).get("status") == "True"
        return found if registered and found["Provisioned"]["status"] == "True" else None

    wait_for("sshjoin installed and registered", joined, JOIN_TIMEOUT)
    client = downstream(api, env, cluster, tmp_path / "kubeconfig")
    core = k8s.CoreV1Api(client)
    node = core.read_node("sshjoin")
    internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
    assert internal == [machine.address]
    assert (machine.rootfs / "usr/local/bin/corral-node-uninstall.sh").exists()
    # Its registration token was used up.
    tokens = crs.list_namespaced_custom_object(GROUP, VERSION, cluster,
                                               "clusterregistrationtokens")["items"]  # fmt: skip
    assert not [t for t in tokens if t["spec"].get("machine") == name]

    # Deleting it uninstalls the machine and removes its node, credential and key.
    assert api.delete(f"/v3/clusters/{cluster}/nodes/{name}").status == 204

    def gone() -> bool:
        items = crs.list_namespaced_custom_object(GROUP, VERSION, cluster, "nodes")["items"]
        return not [r for r in items if r["metadata"]["name"] == name]

    wait_for(f"{name} gone", gone, GONE_TIMEOUT)
    assert "sshjoin" not in {n.metadata.name for n in core.list_node().items}
    accounts = core.list_namespaced_service_account(JOIN_NAMESPACE).items
    assert account_name(name) not in {a.metadata.name for a in accounts}
    management = k8s.CoreV1Api(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    secret = names.ssh_key_secret_name(cluster, name)
    assert not management.list_namespaced_secret(
        names.SYSTEM_NAMESPACE, field_selector=f"metadata.name={secret}"
    ).items
    for path in ("var/lib/corral-node", "usr/local/bin/corral-node-uninstall.sh"):
        assert not (machine.rootfs / path).exists(), path
    # Nothing of the node runs there any more: the machine's own containerd and init remain.
    ps = machine.exec(["ps", "-e", "-o", "comm="])
    assert {"kubelet", "kube-proxy"}.isdisjoint(ps.stdout.decode().split())
