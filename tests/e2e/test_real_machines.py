"""A provisioned cluster whose workers are real machines (issue 23, docs/design/real-machines.md).

One k3s cluster, provisioned through /v3 on the management cluster's real node, gets real
machines of the local cloud by every path corral offers: the node command of its registration
token run on a machine as root, a node pool of the local cloud's executable driver, and a
machine added over SSH. Then, through /v3 only, what a platform team would do: a workload
spread over the machines, its NodePort answering on each, pods reaching each other across
machines, logs and execute, project isolation, a drain and a scale-down, and bad input at each
door. The cluster is shared across the module: provisioning one takes a minute.
"""

from __future__ import annotations

import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.devenv.environment import Environment
from corral.devenv.machine import Machine
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import set_setting, stack_options

PROVISION_TIMEOUT = 300.0
JOIN_TIMEOUT = 180.0
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
    listed = api.get(f"/v3/nodes?clusterId={cluster_id}").body["data"]
    return {n["hostname"]: n for n in listed}


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
    conditions = {c["type"]: c["status"] for c in node["conditions"]}
    for kind in ("Initialized", "Provisioned", "Registered", "Ready"):
        assert conditions.get(kind) == "True", (kind, node["conditions"])
    assert node["ipAddress"] == joined.address
    assert node["worker"] is True


def _kubectl(env: Environment, *args: str) -> str:
    done = subprocess.run(
        [str(env.options.devkube), "kubectl", f"--kubeconfig={env.management_kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout + done.stderr
