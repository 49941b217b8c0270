"""Provisioned clusters: control planes hosted as pods in the management cluster.

The module's own environment has a real node and `hosted_control_planes`: the control-plane
image on the node, a hostPath StorageClass, and corral's settings naming both. Its tests run
while the session's kwok-only `stack` may be up too; only one real node exists at a time.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.provisioning import catalog
from corral.devenv import hosted as hosting
from corral.devenv.environment import Environment
from corral.devenv.images import ControlPlaneImage
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import set_setting, stack_options


def _hostpath_entries() -> set[Path] | None:
    directory = hosting.HOSTPATH_DIR
    return set(directory.iterdir()) if directory.is_dir() else None


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    """corral on a management cluster whose real node can run hosted control planes."""
    before = _hostpath_entries()
    options = stack_options(
        tmp_path_factory.mktemp("provisioning"),
        devkube,
        downstream_clusters=0,
        real_nodes=1,
        hosted_control_planes=True,
    )
    with Environment(options) as env:
        # Tests poll clusters as the admin far more often than a person would.
        set_setting(env, "api-rate-limit-per-minute", "100000")
        yield env
    # The volumes the tests left bound are the environment's to remove, and only those.
    assert _hostpath_entries() == before


@pytest.fixture(scope="module")
def hosted_api(hosted: Environment) -> Api:
    return Api(hosted.api_url, ssl.create_default_context(cafile=str(hosted.ca_path)),
               hosted.admin_token)  # fmt: skip


@pytest.fixture(scope="module")
def hosted_management(hosted: Environment) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(hosted.management_kubeconfig))


@pytest.fixture(scope="module")
def controlplane_image(hosted: Environment) -> ControlPlaneImage:
    assert hosted.controlplane_image is not None
    return hosted.controlplane_image


def test_a_hostpath_volume_and_the_controlplane_image_run_on_the_real_node(
    hosted_management: k8s.ApiClient, controlplane_image: ControlPlaneImage
) -> None:
    core = k8s.CoreV1Api(hosted_management)
    namespace = f"hostpath-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": namespace}})
    claim = {
        "metadata": {"name": "data"},
        "spec": {
            "storageClassName": hosting.STORAGE_CLASS,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "16Mi"}},
        },
    }
    core.create_namespaced_persistent_volume_claim(namespace, claim)
    bound = wait_for(
        "PVC data Bound",
        lambda: _bound(core.read_namespaced_persistent_volume_claim("data", namespace)),
        60,
    )
    volume = core.read_persistent_volume(bound)
    assert volume.spec.storage_class_name == hosting.STORAGE_CLASS
    assert volume.spec.persistent_volume_reclaim_policy == "Delete"
    directory = Path(volume.spec.host_path.path)
    assert directory.parent == hosting.HOSTPATH_DIR and directory.is_dir()

    pod = {
        "metadata": {"name": "versions"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "versions",
                    "image": controlplane_image.reference,
                    "imagePullPolicy": "Never",
                    "command": [
                        "/bin/sh",
                        "-c",
                        "set -e; kube-apiserver --version; etcdctl version; "
                        "echo written-in-the-pod > /data/proof",
                    ],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    phase = wait_for(
        "pod versions done",
        lambda: _finished(core.read_namespaced_pod("versions", namespace)),
        60,
    )
    log = core.read_namespaced_pod_log("versions", namespace)
    assert phase == "Succeeded", log
    assert f"Kubernetes {controlplane_image.version}" in log
    assert "etcdctl version: 3.6.8" in log
    # The kubelet runs in a mount namespace of its own: the pod wrote into the host's folder.
    assert (directory / "proof").read_text() == "written-in-the-pod\n"

    core.delete_namespaced_pod("versions", namespace, grace_period_seconds=0)
    core.delete_namespaced_persistent_volume_claim("data", namespace)
    wait_for("PV deleted", lambda: _gone(lambda: core.read_persistent_volume(bound)), 60)
    wait_for(f"{directory} removed", lambda: not directory.exists(), 10)

    # A volume still bound when the environment stops is removed with it (the fixture checks).
    core.create_namespaced_persistent_volume_claim(namespace, claim)
    wait_for(
        "a second PVC Bound",
        lambda: _bound(core.read_namespaced_persistent_volume_claim("data", namespace)),
        60,
    )


def test_the_version_catalog_names_the_local_controlplane_image(
    hosted_api: Api, controlplane_image: ControlPlaneImage
) -> None:
    response = hosted_api.get("/v3/settings/kubernetes-version-catalog")
    assert response.status == 200, response.body
    assert response.body["customized"] is True
    release = catalog.parse(response.body["value"]).release(controlplane_image.version)
    assert {c.image for c in release.components.values()} == {controlplane_image.reference}
    assert release.component(catalog.KWOK).command == ("/usr/local/bin/corral-kwok",)
    assert release.component(catalog.ETCD).command == ("/usr/local/bin/etcd",)
    storage = hosted_api.get("/v3/settings/hosted-control-plane-storage-class")
    assert storage.body["value"] == hosting.STORAGE_CLASS


def _bound(claim: k8s.V1PersistentVolumeClaim) -> str | None:
    return claim.spec.volume_name if claim.status.phase == "Bound" else None


def _finished(pod: k8s.V1Pod) -> str | None:
    return pod.status.phase if pod.status.phase in ("Succeeded", "Failed") else None


def _gone(read: Callable[[], object]) -> bool:
    try:
        read()
    except k8s.ApiException as exc:
        return exc.status == 404
    return False
