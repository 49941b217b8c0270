"""The cluster agent from corral's image, run by the import manifest's Deployment as a pod on a
real node (kubelet, containerd, runc).

corral's image is built by `make image`'s script and imported into the node's containerd, as
`kind load image-archive` would; corral runs with `CORRAL_AGENT_IMAGE` naming it, as the chart
sets it to its own image. The cluster registered is the one whose node is real here: the
management cluster, created in corral with only a name and registered by its `insecureCommand`,
run as its admin. The agent then runs as the manifest says (its image, its ServiceAccount's
token mounted, non-root, read-only, no capabilities) and dials corral's external URL from the
pod network: the cluster goes Active through the tunnel, and deleting the pod makes it
Unavailable until the Deployment's next pod is back. That corral cannot reach a registered
cluster otherwise is proved in test_cluster_agent.py, on a cluster with a kwok node.
"""

from __future__ import annotations

import base64
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.tunnel import manifest
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import stack_options

pytestmark = pytest.mark.timeout(600)

NODE = "management-real-0"
SELECTOR = f"app.kubernetes.io/name={manifest.NAME}"
# The image is at hand on the node: the pod starts in seconds, the agent dials at once.
POD_TIMEOUT = 90.0
KUBECTL_TIMEOUT = 60.0


@dataclass
class Registered:
    env: Environment
    api: Api
    core: k8s.CoreV1Api
    image: str
    id: str


@pytest.fixture(scope="module")
def registered(
    tmp_path_factory: pytest.TempPathFactory, devkube: Path, image: tuple[str, Path]
) -> Iterator[Registered]:
    reference, archive = image
    root = tmp_path_factory.mktemp("agent-pod")
    options = stack_options(root, devkube, downstream_clusters=0, real_nodes=1,
                            agent_image=reference)  # fmt: skip
    with Environment(options) as env:
        env.import_image(reference.rsplit(":", 1)[0], archive)
        client = k8s_config.new_client_from_config(config_file=str(env.management_kubeconfig))
        context = ssl.create_default_context(cafile=str(env.ca_path))
        api = Api(env.api_url, context, env.admin_token)
        made = api.post("/v3/clusters", {"type": "cluster", "name": "podded"})
        assert made.status == 201, made.body
        cluster_id = made.body["id"]

        def default_token() -> dict[str, Any] | None:
            listed = api.get(f"/v3/clusterregistrationtokens?clusterId={cluster_id}").body
            return next((t for t in listed["data"] if t["manifestUrl"]), None)

        token = wait_for("the cluster's registration token", default_token, 30)
        # The cluster's admin runs the registration command (corral's certificate is
        # self-signed here, hence the insecure one; the agent pins corral's CA itself).
        bin_dir = root / "bin"
        bin_dir.mkdir()
        kubectl = bin_dir / "kubectl"
        kubectl.write_text(
            f'#!/bin/sh\nexec {devkube} kubectl --kubeconfig={env.management_kubeconfig} "$@"\n'
        )
        kubectl.chmod(0o755)
        applied = subprocess.run(
            ["/bin/sh", "-c", token["insecureCommand"]],
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(root)},
            capture_output=True, text=True, timeout=KUBECTL_TIMEOUT, check=False,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr
        assert f"deployment.apps/{manifest.NAME} created" in applied.stdout, applied.stdout
        yield Registered(env, api, k8s.CoreV1Api(client), reference, cluster_id)


def _running_agent(core: k8s.CoreV1Api, not_uid: str = "") -> k8s.V1Pod | None:
    """The agent's pod once its container runs, other than the pod `not_uid`."""
    pods = core.list_namespaced_pod(manifest.NAMESPACE, label_selector=SELECTOR).items
    for pod in pods:
        statuses = pod.status.container_statuses or []
        running = statuses and all(s.state.running for s in statuses)
        if pod.metadata.uid != not_uid and not pod.metadata.deletion_timestamp and running:
            return pod
    return None


def _log(core: k8s.CoreV1Api, pod: k8s.V1Pod) -> str:
    text: str = core.read_namespaced_pod_log(pod.metadata.name, manifest.NAMESPACE)
    return text


def _connected_log(core: k8s.CoreV1Api, pod: k8s.V1Pod, url: str) -> str:
    """The pod's log once it says the agent connected: the kubelet's copy of a container's
    output can trail what corral already saw of the connection."""
    line = f"connected to corral at {url}"

    def connected() -> str | None:
        log = _log(core, pod)
        return log if line in log else None

    return wait_for(f"the log line {line!r}", connected, 10)


@pytest.fixture(scope="module")
def active(registered: Registered) -> k8s.V1Pod:
    """The agent's pod, running, once the cluster is Active through its tunnel."""
    pod = wait_for("the agent's pod running", lambda: _running_agent(registered.core),
                   POD_TIMEOUT, registered.env.corral, interval=0.5)  # fmt: skip
    wait_for("the cluster to go active through the agent in the pod",
             lambda: registered.api.get(f"/v3/clusters/{registered.id}").body["state"]
             == "active", POD_TIMEOUT, registered.env.corral, interval=0.5)  # fmt: skip
    return pod


def test_the_agent_runs_from_corrals_image_as_a_pod_on_the_real_node(
    registered: Registered, active: k8s.V1Pod
) -> None:
    pod = active
    assert pod.spec.node_name == NODE
    node = registered.core.read_node(NODE)
    assert node.status.node_info.container_runtime_version.startswith("containerd://")
    assert "kwok.x-k8s.io/node" not in (node.metadata.annotations or {})
    (container,) = pod.spec.containers
    assert container.image == registered.image and container.command == ["corral-agent"]
    (status,) = pod.status.container_statuses
    assert status.image.endswith(registered.image) and status.image_id
    # On the pod network, not the node's: the agent dialled corral from the pod's address.
    assert not pod.spec.host_network
    node_address = next(a.address for a in node.status.addresses if a.type == "InternalIP")
    assert pod.status.pod_ip and pod.status.pod_ip != node_address
    log = _connected_log(registered.core, pod, registered.env.api_url)
    assert f"dialling {registered.env.api_url}" in log, log
    credential = registered.core.read_namespaced_secret(
        manifest.CREDENTIAL_SECRET, manifest.NAMESPACE
    )
    assert base64.b64decode(credential.data["credential"]).decode() not in log


def test_the_cluster_is_active_through_the_pods_tunnel_with_its_image(
    registered: Registered, active: k8s.V1Pod
) -> None:
    api = registered.api
    cluster = api.get(f"/v3/clusters/{registered.id}").body
    deployed = next(c for c in cluster["status"]["conditions"] if c["type"] == "AgentDeployed")
    assert (deployed["status"], deployed["reason"]) == ("True", "AgentConnected")
    assert cluster["status"]["agentImage"] == registered.image
    credential = registered.core.read_namespaced_secret(f"{registered.id}-credential", "svc-system")
    assert base64.b64decode(credential.data["transport"]) == b"tunnel"
    nodes = api.get(f"/k8s/clusters/{registered.id}/api/v1/nodes")
    assert nodes.status == 200, nodes.body.get("message")
    assert NODE in [n["metadata"]["name"] for n in nodes.body["items"]]


def _conditions(api: Api, cluster_id: str) -> dict[str, tuple[str, str]]:
    status = api.get(f"/v3/clusters/{cluster_id}").body.get("status") or {}
    return {c["type"]: (c["status"], c.get("reason", "")) for c in status.get("conditions") or []}


def test_deleting_the_agents_pod_makes_the_cluster_unavailable_until_the_next_pod(
    registered: Registered, active: k8s.V1Pod
) -> None:
    """The node is cordoned first, as a drain does: the Deployment's next pod waits, Pending,
    for as long as the test looks at the cluster without its agent (uncordoned, the next pod
    is back within two seconds, which is shorter than the test can be sure to see)."""
    api, core = registered.api, registered.core
    core.patch_node(NODE, {"spec": {"unschedulable": True}})
    try:
        # As `kubectl delete pod` does: the agent gets SIGTERM and ends its tunnel at once.
        core.delete_namespaced_pod(active.metadata.name, manifest.NAMESPACE)
        wait_for("Ready False AgentDisconnected without the agent",
                 lambda: _conditions(api, registered.id).get("Ready")
                 == ("False", "AgentDisconnected"), 15, interval=0.5)  # fmt: skip
        assert _conditions(api, registered.id)["AgentDeployed"] == ("False", "AgentDisconnected")
        assert api.get(f"/v3/clusters/{registered.id}").body["state"] == "unavailable"
        assert api.get(f"/k8s/clusters/{registered.id}/api/v1/nodes").status == 503
        pods = core.list_namespaced_pod(manifest.NAMESPACE, label_selector=SELECTOR).items
        waiting = [p for p in pods if p.metadata.uid != active.metadata.uid]
        assert [p.status.phase for p in waiting] == ["Pending"], waiting
    finally:
        core.patch_node(NODE, {"spec": {"unschedulable": False}})

    # What brings it back is the Deployment's next pod, on the real node.
    pod = wait_for("the next agent pod running",
                   lambda: _running_agent(core, active.metadata.uid), POD_TIMEOUT)  # fmt: skip
    assert pod.spec.node_name == NODE
    wait_for("the cluster active again through the next pod",
             lambda: api.get(f"/v3/clusters/{registered.id}").body["state"] == "active",
             30, interval=0.5)  # fmt: skip
    _connected_log(core, pod, registered.env.api_url)
    assert _conditions(api, registered.id)["AgentDeployed"] == ("True", "AgentConnected")
    nodes = api.get(f"/k8s/clusters/{registered.id}/api/v1/nodes")
    assert nodes.status == 200, nodes.body.get("message")
