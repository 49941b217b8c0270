"""A cluster registered through its agent, the whole stack running: `POST /v3/clusters` with
only a name, the manifest fetched as `kubectl apply -f <manifestUrl>` would, and `corral-agent`
run as a process next to a simulated downstream cluster with a ServiceAccount of that cluster
(as the manifest's Deployment would run it). The operator, a process of its own, reaches the
cluster only through the API server's tunnel (the cluster's credential is the agent's, marked
for the tunnel): the cluster goes Active, loses its agent, and comes back.

Not yet here (docs/design/cluster-agent.md): a downstream API server corral cannot reach at
all (a network namespace), and the manifest applied inside the cluster from corral's image.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core import kubeconfig
from corral.devenv.controlplane import ControlPlane
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api

AGENT_NAMESPACE = "svc-agent"
IMAGE = "localhost/corral:e2e-agent"


def _conditions(api: Api, cluster_id: str) -> dict[str, tuple[str, str, str]]:
    body = api.get(f"/v3/clusters/{cluster_id}").body
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in (body.get("status") or {}).get("conditions") or []
    }


def _agent_account(plane: ControlPlane, directory: Path) -> Path:
    """What the manifest makes for the agent, made with the official client: a ServiceAccount
    bound to cluster-admin and a token of it; returns a kubeconfig of that token."""
    admin = k8s_config.new_client_from_config(str(plane.kubeconfig_path))
    core, rbac = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=AGENT_NAMESPACE)))
    core.create_namespaced_service_account(
        AGENT_NAMESPACE, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="corral-agent"))
    )
    rbac.create_cluster_role_binding(k8s.V1ClusterRoleBinding(
        metadata=k8s.V1ObjectMeta(name="corral-agent"),
        role_ref=k8s.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole",
                               name="cluster-admin"),
        subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name="corral-agent",
                                    namespace=AGENT_NAMESPACE)],
    ))  # fmt: skip
    request = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[]))
    token = core.create_namespaced_service_account_token("corral-agent", AGENT_NAMESPACE, request)
    config = yaml.safe_load(plane.kubeconfig_path.read_text())
    cluster = config["clusters"][0]["cluster"]
    built = kubeconfig.build(
        "agent", cluster["server"], base64.b64decode(cluster["certificate-authority-data"]),
        kubeconfig.Credentials(token=token.status.token),
    )  # fmt: skip
    path = directory / "agent.kubeconfig"
    path.write_text(yaml.safe_dump(built))
    path.chmod(0o600)
    return path


@pytest.fixture
def registered(
    stack: Environment, api: Api, add_downstream: Callable[..., ControlPlane], tmp_path: Path
) -> Iterator[tuple[str, Callable[[], subprocess.Popen[bytes]]]]:
    """The cluster made with only a name, and a way to start its agent."""
    plane = add_downstream("agented", 1)
    made = api.post("/v3/clusters", {"type": "cluster", "name": "agented"})
    assert made.status == 201, made.body
    cluster_id = made.body["id"]

    def default_token() -> dict[str, Any] | None:
        listed = api.get(f"/v3/clusterregistrationtokens?clusterId={cluster_id}").body["data"]
        return next((t for t in listed if t["manifestUrl"]), None)

    token = wait_for("the cluster's registration token", default_token, 30)
    # As `kubectl apply -f <manifestUrl>` fetches it: no credential but the URL.
    with urllib.request.urlopen(token["manifestUrl"], timeout=30, context=api.context) as answer:
        documents = list(yaml.safe_load_all(answer.read()))
    credential = documents[4]["stringData"]["credential"]
    agent_config = _agent_account(plane, tmp_path)
    env = {
        "PATH": os.environ["PATH"],
        "CORRAL_URL": stack.api_url,
        "CORRAL_CLUSTER": cluster_id,
        "CORRAL_AGENT_CREDENTIAL": credential,
        "CORRAL_CA_CHECKSUM": hashlib.sha256(stack.ca_path.read_bytes()).hexdigest(),
        "CORRAL_AGENT_IMAGE": IMAGE,
        "KUBECONFIG": str(agent_config),
    }
    started: list[subprocess.Popen[bytes]] = []
    log = (tmp_path / "agent.log").open("ab")

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen([sys.executable, "-m", "corral.agent"], env=env,
                                   stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        started.append(process)
        return process

    yield cluster_id, start
    for process in started:
        process.terminate()
        process.wait(10)
    log.close()
    assert api.delete(f"/v3/clusters/{cluster_id}").status in (200, 204)


def test_a_cluster_goes_active_through_its_agent_and_unavailable_without_it(
    api: Api, registered: tuple[str, Callable[[], subprocess.Popen[bytes]]]
) -> None:
    cluster_id, start = registered
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "pending"
    agent = start()

    def active() -> dict[str, Any] | None:
        body = api.get(f"/v3/clusters/{cluster_id}").body
        return body if body["state"] == "active" else None

    body = wait_for("the cluster to go active through its agent", active, 90, interval=0.5)
    deployed = _conditions(api, cluster_id)["AgentDeployed"]
    assert deployed[:2] == ("True", "AgentConnected") and deployed[2].startswith("agent ")
    assert body["status"]["agentImage"] == IMAGE
    # The proxy reaches the cluster through the tunnel: its node is there.
    nodes = api.get(f"/k8s/clusters/{cluster_id}/api/v1/nodes")
    assert nodes.status == 200 and len(nodes.body["items"]) == 1

    agent.terminate()
    agent.wait(10)

    def unavailable() -> bool:
        ready = _conditions(api, cluster_id).get("Ready")
        return ready is not None and ready[:2] == ("False", "AgentDisconnected")

    wait_for("Ready False AgentDisconnected without the agent", unavailable, 20, interval=0.5)
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "unavailable"

    start()
    wait_for("the cluster to come back with its agent", active, 30, interval=0.5)
