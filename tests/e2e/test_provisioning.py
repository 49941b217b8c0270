"""Provisioned clusters: control planes hosted as pods in the management cluster.

The module's own environment has a real node and `hosted_control_planes`: the control-plane
image on the node, a hostPath StorageClass, and corral's settings naming both. Its tests run
while the session's kwok-only `stack` may be up too; only one real node exists at a time.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import hashlib
import json
import secrets
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from joserfc import jwt as jose_jwt
from joserfc.jwk import ECKey
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from lightkube import ApiError, Client, KubeConfig, operators
from lightkube.models.apps_v1 import DeploymentSpec
from lightkube.models.core_v1 import (
    Container,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    SecurityContext,
)
from lightkube.models.meta_v1 import LabelSelector, ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import (
    ConfigMap,
    Event,
    Namespace,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Secret,
    ServiceAccount,
)

from corral.core import pki, settings
from corral.core.api import names
from corral.core.clusters.importing import AGENT_NAMESPACE
from corral.core.kube import claims, kinds
from corral.core.kube.claims import ANNOTATION_IDENTITY
from corral.core.kube.client import as_dict
from corral.core.provisioning import agent_token, catalog
from corral.devenv import hosted as hosting
from corral.devenv import network
from corral.devenv.controlplane import free_port
from corral.devenv.environment import Environment
from corral.devenv.images import ControlPlaneImage
from corral.devenv.s3server import Keys, S3Server
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import set_setting, stack_options

# Every cluster the selected tests share is asked for when the module starts (see Fleet).
pytestmark = pytest.mark.usefixtures("fleet")


def _hostpath_entries() -> set[Path] | None:
    directory = hosting.HOSTPATH_DIR
    return set(directory.iterdir()) if directory.is_dir() else None


@pytest.fixture(scope="module")
def hosted(
    tmp_path_factory: pytest.TempPathFactory, devkube: Path, previous_devkube: Path
) -> Iterator[Environment]:
    """corral on a management cluster whose real node can run hosted control planes, of
    Kubernetes 1.36 and (to upgrade from) 1.35."""
    before = _hostpath_entries()
    options = stack_options(
        tmp_path_factory.mktemp("provisioning"),
        devkube,
        downstream_clusters=0,
        real_nodes=1,
        hosted_control_planes=True,
        previous_devkube=previous_devkube,
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


def _finished(pod: k8s.V1Pod) -> str:
    """The phase of a pod that ran to its end; raises with where it is while it is not."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return str(pod.status.phase)
    waiting = [f"{status.name}: {status.state}" for status in pod.status.container_statuses or []]
    conditions = [f"{c.type}={c.status} {c.reason or ''}" for c in pod.status.conditions or []]
    raise RuntimeError(f"{pod.status.phase} on {pod.spec.node_name}; {conditions}; {waiting}")


def _gone(read: Callable[[], object]) -> bool:
    try:
        read()
    except k8s.ApiException as exc:
        return exc.status == 404
    return False


# -- provisioned clusters -----------------------------------------------------------------------

PROVISION_TIMEOUT = 300.0
WORKER_TIMEOUT = 120.0
# The autoscaler's timers, lowered so that a scale-down follows within seconds.
AUTOSCALER_KNOBS = {settings.SCALE_DOWN_UNNEEDED_SETTING: "4",
                    settings.SCALE_DOWN_DELAY_AFTER_ADD_SETTING: "10"}  # fmt: skip


def condition(cluster: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in (cluster.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {}


def create_cluster(
    api: Api, name: str, driver: str, version: str, config: dict[str, Any] | None = None
) -> str:
    """A cluster made through /v3, with `config`'s fields in its configuration: its id."""
    created = api.post(
        "/v3/clusters",
        {"type": "cluster", "name": name, f"{driver}Config": {
            "kubernetesVersion": version, **(config or {})}},
    )  # fmt: skip
    assert created.status == 201, created.body
    return str(created.body["id"])


def kubeconfig_through_corral(api: Api, cluster_id: str, ca: Path, path: Path) -> Client:
    """kubectl's view of the cluster: a kubeconfig from generateKubeconfig, through corral's
    proxy, trusting corral's CA as CORRAL_CA tells a client to."""
    answer = api.post(f"/v3/clusters/{cluster_id}?action=generateKubeconfig", {})
    assert answer.status == 200, answer.body
    config = yaml.safe_load(base64.b64decode(answer.body["config"]))
    for entry in config["clusters"]:
        entry["cluster"]["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    path.write_text(yaml.safe_dump(config))
    return Client(KubeConfig.from_file(path))


class Flavour(NamedTuple):
    driver: str
    version: str
    config: dict[str, Any] | None = None  # the rest of its configuration


# The module's clusters, by the name of the fixture that hands each out, in the order the
# tests first take them. Two rke2 clusters of one version: autoscaling and deletion, and a
# restore, each need one that nothing else changed.
FLAVOURS = ("autoscaled_rke2_cluster", "k3s_cluster", "rke2_cluster", "previous_rke2_cluster",
            "previous_k3s_cluster", "s3_rke2_cluster")  # fmt: skip


class Fleet:
    """The module's provisioned clusters. Provisioning one is mostly waiting (images, pods,
    probes), so every cluster the selected tests need is asked for at once when the module
    starts, watched on a thread until Ready (the Pending messages it shows on the way, and how
    long it took), and awaited when a test first takes it; a test that deletes one says so,
    and a later test gets a new one. Those left are deleted together when the module ends,
    and awaited: their volumes must go before the environment does."""

    def __init__(self, api: Api, management: Client, flavours: dict[str, Flavour]) -> None:
        self.api = api
        self.management = management
        self.flavours = flavours
        self.ordered: dict[str, str] = {}  # flavour -> cluster id
        self.deleted: list[str] = []
        self.pending: dict[str, set[str]] = {}  # cluster id -> Pending messages seen
        self.ready_after: dict[str, float] = {}  # cluster id -> seconds from create to Ready
        self.provisioning: dict[str, float] = {}  # cluster id -> monotonic time of its create
        self.closing = threading.Event()
        self.watcher = threading.Thread(target=self._watch, daemon=True)
        self.watcher.start()

    def order(self, flavour: str) -> None:
        driver, version, config = self.flavours[flavour]
        name = f"hosted-{flavour.removesuffix('_cluster').replace('_', '-')}"
        began = time.monotonic()
        cluster_id = create_cluster(self.api, name, driver, version, config)
        self.pending[cluster_id] = set()
        self.provisioning[cluster_id] = began
        self.ordered[flavour] = cluster_id

    def _watch(self) -> None:
        while not self.closing.wait(0.2):
            for cluster_id, began in list(self.provisioning.items()):
                try:
                    body = self.api.get(f"/v3/clusters/{cluster_id}").body
                except OSError:
                    continue  # the API server restarting: look again
                if message := condition(body, "Pending").get("message"):
                    self.pending[cluster_id].add(message)
                if condition(body, "Ready").get("status") == "True":
                    self.ready_after[cluster_id] = time.monotonic() - began
                    del self.provisioning[cluster_id]

    def take(self, flavour: str) -> dict[str, Any]:
        """The flavour's cluster, awaited until Ready: its /v3 body."""
        if flavour not in self.ordered:
            self.order(flavour)
        cluster_id = self.ordered[flavour]
        wait_for(f"cluster {cluster_id} Ready", lambda: cluster_id in self.ready_after,
                 PROVISION_TIMEOUT, interval=0.2)  # fmt: skip
        return dict(self.api.get(f"/v3/clusters/{cluster_id}").body)

    def delete(self, cluster_id: str) -> None:
        """DELETE one of the fleet's clusters; the module's end awaits it."""
        assert self.api.delete(f"/v3/clusters/{cluster_id}").status == 204
        self.ordered = {f: c for f, c in self.ordered.items() if c != cluster_id}
        self.deleted.append(cluster_id)

    def close(self) -> None:
        self.closing.set()
        self.watcher.join()
        for cluster_id in list(self.ordered.values()):
            self.delete(cluster_id)

        def gone(cluster_id: str) -> bool:
            return self.api.get(f"/v3/clusters/{cluster_id}").status == 404 and absent(
                self.management, Namespace, cluster_id)  # fmt: skip

        wait_for(f"clusters {', '.join(self.deleted)} gone",
                 lambda: all(gone(c) for c in self.deleted), PROVISION_TIMEOUT)  # fmt: skip


@pytest.fixture(scope="module")
def fleet(request: pytest.FixtureRequest, hosted: Environment, hosted_api: Api) -> Iterator[Fleet]:
    wanted = {name for item in request.session.items if item.module is request.module
              for name in getattr(item, "fixturenames", ()) if name in FLAVOURS}  # fmt: skip
    assert hosted.previous_controlplane_image is not None
    previous = hosted.previous_controlplane_image.version
    flavours = {
        "autoscaled_rke2_cluster": Flavour("rke2", "v1.36.3+rke2r1"),
        "rke2_cluster": Flavour("rke2", "v1.36.3+rke2r1"),
        "k3s_cluster": Flavour("k3s", "v1.36.3+k3s1"),
        "previous_rke2_cluster": Flavour("rke2", f"{previous}+rke2r1"),
        "previous_k3s_cluster": Flavour("k3s", f"{previous}+k3s1"),
    }
    if "s3_rke2_cluster" in wanted:  # its etcd backs up to the module's S3 server
        target: S3Target = request.getfixturevalue("s3_target")
        flavours["s3_rke2_cluster"] = Flavour("rke2", "v1.36.3+rke2r1",
                                              {"etcd": {"s3": target.config}})  # fmt: skip
    fleet = Fleet(hosted_api, Client(KubeConfig.from_file(hosted.management_kubeconfig)),
                  flavours)  # fmt: skip
    for flavour in (f for f in FLAVOURS if f in wanted):
        fleet.order(flavour)
    yield fleet
    fleet.close()


@pytest.fixture
def autoscaled_rke2_cluster(fleet: Fleet) -> dict[str, Any]:
    return fleet.take("autoscaled_rke2_cluster")


@pytest.fixture
def rke2_cluster(fleet: Fleet) -> dict[str, Any]:
    return fleet.take("rke2_cluster")


@pytest.fixture
def k3s_cluster(fleet: Fleet) -> dict[str, Any]:
    return fleet.take("k3s_cluster")


@pytest.fixture
def previous_rke2_cluster(fleet: Fleet) -> dict[str, Any]:
    return fleet.take("previous_rke2_cluster")


@pytest.fixture
def previous_k3s_cluster(fleet: Fleet) -> dict[str, Any]:
    return fleet.take("previous_k3s_cluster")


@pytest.fixture
def s3_rke2_cluster(fleet: Fleet) -> dict[str, Any]:
    return fleet.take("s3_rke2_cluster")


def test_an_rke2_cluster_is_provisioned_autoscales_its_pool_workers_and_goes_whole(
    hosted: Environment, hosted_api: Api, fleet: Fleet, autoscaled_rke2_cluster: dict[str, Any],
    tmp_path: Path,
) -> None:  # fmt: skip
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster = autoscaled_rke2_cluster
    cluster_id = cluster["id"]
    pending, seconds = fleet.pending[cluster_id], fleet.ready_after[cluster_id]
    print(f"\nrke2 cluster {cluster_id}: create to Ready in {seconds:.1f}s")
    assert any(m.startswith("waiting for") for m in pending), pending
    assert condition(cluster, "Provisioned")["reason"] == "Provisioned"
    status = cluster["status"]
    assert status["version"]["gitVersion"] == "v1.36.3"
    assert status["apiEndpoint"].startswith("https://10.") and status["caCert"]
    assert cluster["kubernetesVersion"] == "v1.36.3"

    # Machines may join it with a node command: the operator made its default registration
    # token once it was provisioned, shown to its owner (the administrator here).
    def default_token() -> dict[str, Any] | None:
        shown = hosted_api.get(f"/v3/clusterregistrationtokens/{cluster_id}:default-token")
        return dict(shown.body) if shown.status == 200 else None

    token = wait_for("the default registration token", default_token, WORKER_TIMEOUT)
    assert token["nodeCommand"].startswith("curl -fsSL --pinnedpubkey sha256//")
    assert f"--token {token['token']} " in token["nodeCommand"]

    # kubectl through corral's proxy, as a user would.
    downstream = kubeconfig_through_corral(hosted_api, cluster_id, hosted.ca_path, tmp_path / "kc")
    assert {"default", "kube-system"} <= {n.metadata.name for n in downstream.list(Namespace)}

    # corral's token is the TokenRequest API's, which the apiserver issued at once: it expires
    # in a year, and no legacy token Secret (the controller manager's to fill) was made for it.
    stored = management.get(Secret, names.credential_secret_name(cluster_id),
                            namespace=names.SYSTEM_NAMESPACE)  # fmt: skip
    token = base64.b64decode(stored.data["token"]).decode()
    expiry = agent_token.expires(token)
    assert expiry is not None
    left = expiry - datetime.datetime.now(datetime.UTC)
    assert agent_token.LIFETIME - datetime.timedelta(hours=1) < left <= agent_token.LIFETIME
    assert not [s for s in downstream.list(Secret, namespace=AGENT_NAMESPACE)
                if s.type == "kubernetes.io/service-account-token"]  # fmt: skip

    # The rke2 flavour: anonymous requests reach the health endpoints only, and PodSecurity
    # baseline is enforced on a namespace that says nothing.
    ca = ssl.create_default_context(cadata=base64.b64decode(status["caCert"]).decode())
    assert anonymous(status["apiEndpoint"], "/readyz", ca) == 200
    assert anonymous(status["apiEndpoint"], "/version", ca) == 401
    downstream.create(Namespace(metadata=ObjectMeta(name="psa")))
    # Ready no longer waits for the controller manager, which makes each namespace's `default`
    # service account (docs/provisioning.md): a pod is refused without it.
    wait_for("the service account psa/default",
             lambda: not absent(downstream, ServiceAccount, "default", "psa"), 60)  # fmt: skip
    with pytest.raises(ApiError) as refused:
        downstream.create(privileged_pod("psa"))
    assert refused.value.status.code == 403 and "baseline" in (refused.value.status.message or "")

    # Two kwok workers from a machine pool with bounds, written through the cluster's /v1 view,
    # and a Deployment that runs on them.
    template = hosted_api.post("/v3/nodetemplates", {"name": "hosted", "kwokConfig": {"cpu": "2"}})
    assert template.status == 201, template.body
    view = f"/v1/provisioning.svc.io.clusters/fleet-default/{cluster_id}"
    workers = {
        "name": "w", "quantity": 2, "autoscalingMinSize": 2, "autoscalingMaxSize": 3,
        "workerRole": True,
        "machineConfigRef": {"kind": "NodeTemplate", "name": template.body["id"]},
    }  # fmt: skip
    pooled = hosted_api.put(view, {"spec": {"rkeConfig": {"machinePools": [workers]}}})
    assert pooled.status == 200, pooled.body
    wait_for("2 Ready workers", lambda: ready_workers(downstream) == 2, WORKER_TIMEOUT)
    downstream.create(deployment("default", "web", replicas=2))
    wait_for("Deployment web available", lambda: available(downstream, "web") == 2,
             WORKER_TIMEOUT)  # fmt: skip

    # The autoscaler: a third pod of 1500m fits neither 2-cpu worker, so the pool grows to its
    # max; with those pods gone it shrinks back to its min.
    for name, value in AUTOSCALER_KNOBS.items():
        assert hosted_api.put(f"/v3/settings/{name}", {"value": value}).status == 200
    downstream.create(deployment("default", "big", replicas=3, cpu="1500m"))
    wait_for("Deployment big available on a third worker",
             lambda: available(downstream, "big") == 3, WORKER_TIMEOUT)  # fmt: skip
    assert ready_workers(downstream) == 3
    downstream.delete(Deployment, "big", namespace="default")
    wait_for("back to the pool's 2 workers",
             lambda: len(list(downstream.list(Node))) == 2, WORKER_TIMEOUT)  # fmt: skip
    shown = hosted_api.get(view).body["spec"]["rkeConfig"]["machinePools"]
    assert [(p["name"], p["quantity"]) for p in shown] == [("w", 2)]
    for name in AUTOSCALER_KNOBS:
        assert hosted_api.put(f"/v3/settings/{name}", {"value": ""}).status == 200

    # DELETE leaves nothing: workers, control plane, data, Secrets, credential, claim.
    identity = cluster["metadata"]["annotations"][ANNOTATION_IDENTITY]
    volumes = [
        pv for pv in management.list(PersistentVolume)
        if pv.spec.claimRef and pv.spec.claimRef.namespace == cluster_id
    ]  # fmt: skip
    assert volumes, "etcd's data lives on a volume"
    token_values = {names.LABEL_CLUSTER: cluster_id,
                    names.LABEL_REGISTRATION_TOKEN: operators.exists()}  # fmt: skip
    assert list(management.list(Secret, namespace=names.SYSTEM_NAMESPACE, labels=token_values))
    fleet.delete(cluster_id)
    wait_for(
        "the cluster gone",
        lambda: hosted_api.get(f"/v3/clusters/{cluster_id}").status == 404,
        PROVISION_TIMEOUT,
    )
    wait_for("its namespace gone", lambda: absent(management, Namespace, cluster_id), 120)
    for pv in volumes:
        name = pv.metadata.name
        wait_for(f"volume {name} gone", lambda n=name: absent(management, PersistentVolume, n), 60)
        assert not Path(pv.spec.hostPath.path).exists()
    assert absent(management, Secret, names.credential_secret_name(cluster_id),
                  names.SYSTEM_NAMESPACE)  # fmt: skip
    assert absent(management, Secret, claims.claim_name(identity), names.SYSTEM_NAMESPACE)
    # The values of its registration tokens, kept apart from the tokens in its namespace.
    assert not list(management.list(Secret, namespace=names.SYSTEM_NAMESPACE, labels=token_values))
    leftovers = [
        p.metadata.name
        for p in management.list(Pod, namespace="*", labels={names.LABEL_CLUSTER: cluster_id})
    ]
    assert leftovers == []
    hosted_api.delete(f"/v3/nodetemplates/{template.body['id']}")


ROTATION_TIMEOUT = 180.0


def test_certificate_rotation_renews_serving_certificates_and_the_ca_while_corral_keeps_working(
    hosted: Environment, hosted_api: Api, k3s_cluster: dict[str, Any], tmp_path: Path
) -> None:
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster = k3s_cluster
    cluster_id = cluster["id"]
    endpoint = cluster["status"]["apiEndpoint"]
    old_ca = base64.b64decode(cluster["status"]["caCert"])
    admin = yaml.safe_load(
        base64.b64decode(
            management.get(Secret, "kubeconfig-admin", namespace=cluster_id).data["kubeconfig"]
        )
    )
    assert namespaces_as(admin, old_ca) == 200
    before = kubeconfig_through_corral(hosted_api, cluster_id, hosted.ca_path, tmp_path / "kc")
    serial = serving_serial(endpoint)

    # Bad input changes nothing.
    refused = hosted_api.post(f"/v3/clusters/{cluster_id}?action=rotateCertificates",
                              {"services": ["kube-apiserver", "kube-dns"]})  # fmt: skip
    assert refused.status == 422 and refused.body["fieldName"] == "services", refused.body
    assert "rotateCertificates" not in management_cluster(management, cluster_id)["spec"]

    # A leaf: the serving certificate is new, the CA is not: the bootstrap admin's old client
    # certificate (renewed with kube-apiserver's) is still accepted.
    with ReadyzPoller(hosted_api, cluster_id) as poller:
        seconds, _ = rotate(hosted_api, cluster_id, {"services": "kube-apiserver"}, 1)
    print(f"\nk3s cluster {cluster_id}: kube-apiserver certificates rotated in {seconds:.1f}s; "
          f"{poller}")  # fmt: skip
    assert serving_serial(endpoint) != serial
    assert namespaces_as(admin, old_ca) == 200
    through = hosted_api.get(f"/k8s/clusters/{cluster_id}/api/v1/namespaces")
    assert through.status == 200, through.body
    assert {"default", "kube-system"} <= {n.metadata.name for n in before.list(Namespace)}

    # The CAs: the old client certificate is refused, corral and its kubeconfigs work on.
    with ReadyzPoller(hosted_api, cluster_id) as poller:
        # The health writer shows the conditions after its look, which an unreachable cluster
        # makes last up to its timeouts: often longer than this rotation's outage.
        seconds, answer = rotate(hosted_api, cluster_id, {"caCertificates": True}, 2, shown=False)
    print(f"k3s cluster {cluster_id}: CA rotation in {seconds:.1f}s; {poller}")
    assert answer["message"] == "rotating CA certificates and all components; kube-proxy has " \
        "no certificates here: simulated nodes run no kube-proxy"  # fmt: skip
    new_ca = base64.b64decode(management.get(Secret, "pki-ca", namespace=cluster_id).data["ca.crt"])
    assert new_ca != old_ca
    # The health writer shows the credential's CA on its next look.
    wait_for(
        "status.caCert the new CA only",
        lambda: (
            base64.b64decode(hosted_api.get(f"/v3/clusters/{cluster_id}").body["status"]["caCert"])
            == new_ca
        ),
        30,
    )
    assert namespaces_as(admin, new_ca) == 401
    assert {"default", "kube-system"} <= {n.metadata.name for n in before.list(Namespace)}
    assert hosted_api.get(f"/k8s/clusters/{cluster_id}/readyz").status == 200


def test_a_leaf_that_expired_while_the_operator_was_away_is_renewed_while_corral_keeps_working(
    hosted: Environment, hosted_api: Api, k3s_cluster: dict[str, Any]
) -> None:
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster_id = k3s_cluster["id"]
    asked = management_cluster(management, cluster_id)["spec"].get("rotateCertificates") or {}
    generation = int(asked.get("generation") or 0) + 1
    ca = management.get(Secret, "pki-ca", namespace=cluster_id).data
    ca_pair = pki.KeyPair(cert=base64.b64decode(ca["ca.crt"]), key=base64.b64decode(ca["ca.key"]))

    with ReadyzPoller(hosted_api, cluster_id) as poller:
        # The scheduler's client certificate, as the cluster's CA issued it, expires while the
        # operator is down (the running scheduler keeps the one it started with).
        with operator_away(hosted):
            kubeconfig = expired(scheduler_kubeconfig(management, cluster_id), ca_pair)
            data = {"kubeconfig": base64.b64encode(kubeconfig).decode()}
            management.patch(Secret, SCHEDULER, {"data": data}, namespace=cluster_id)
        expiry = client_certificate(kubeconfig).not_valid_after_utc

        def renewed() -> bool:
            cluster = hosted_api.get(f"/v3/clusters/{cluster_id}").body
            return (
                (cluster["status"].get("provisioning") or {}).get("certificateRotationGeneration")
                == generation
                and condition(cluster, "Ready").get("status") == "True"
                and condition(cluster, "Updated").get("status") == "True"
            )

        wait_for(f"the scheduler's certificate of {cluster_id} renewed", renewed, ROTATION_TIMEOUT)
    print(f"\nk3s cluster {cluster_id}: an expired leaf renewed; {poller}")

    # Asked as a user's rotation of the service that holds it, saying why.
    stamp = expiry.isoformat(timespec="seconds").replace("+00:00", "Z")
    assert management_cluster(management, cluster_id)["spec"]["rotateCertificates"] == {
        "generation": generation, "caCertificates": False, "services": ["kube-scheduler"],
        "expires": stamp,
    }  # fmt: skip
    fresh = client_certificate(scheduler_kubeconfig(management, cluster_id))
    left = fresh.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert left > datetime.timedelta(days=300)
    fresh.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pair.cert))
    # The Cluster is cluster-scoped: its events are in `default`.
    events = management.list(Event, namespace="default",
                             fields={"involvedObject.name": cluster_id})  # fmt: skip
    assert [e.message for e in events if e.reason == "CertificatesRenewed"] == [
        f"renewed the kube-scheduler certificates (expiring on {stamp}): the control plane "
        "runs the new ones"
    ]
    assert hosted_api.get(f"/k8s/clusters/{cluster_id}/readyz").status == 200
    assert poller.polls > 0


def test_a_rotation_that_leaves_out_an_expired_leaf_is_widened_to_renew_it(
    hosted: Environment, hosted_api: Api, k3s_cluster: dict[str, Any]
) -> None:
    """A user's rotation of the scheduler rolls the control plane's pod, kube-apiserver too,
    which an expired etcd client certificate would keep from ever getting Ready: the renewal
    cannot wait for that rotation, so it replaces it with one of both."""
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster_id = k3s_cluster["id"]
    users = next_rotation(management, cluster_id)

    with operator_away(hosted):
        stamp = expire_etcd_client(management, cluster_id)
        body = {"services": ["kube-scheduler"]}
        answer = hosted_api.post(f"/v3/clusters/{cluster_id}?action=rotateCertificates", body)
        assert answer.status == 200, answer.body

    def renewed() -> bool:
        cluster = hosted_api.get(f"/v3/clusters/{cluster_id}").body
        return (
            (cluster["status"].get("provisioning") or {}).get("certificateRotationGeneration")
            == users + 1
            and condition(cluster, "Ready").get("status") == "True"
            and condition(cluster, "Updated").get("status") == "True"
        )

    wait_for(f"the rotation of {cluster_id} widened and done", renewed, ROTATION_TIMEOUT)
    assert management_cluster(management, cluster_id)["spec"]["rotateCertificates"] == {
        "generation": users + 1, "caCertificates": False,
        "services": ["kube-apiserver", "kube-scheduler"], "expires": stamp,
    }  # fmt: skip
    assert_etcd_client_renewed(management, cluster_id)
    assert hosted_api.get(f"/k8s/clusters/{cluster_id}/readyz").status == 200


def test_corrals_token_is_asked_again_once_less_than_thirty_days_are_left(
    hosted: Environment, hosted_api: Api, k3s_cluster: dict[str, Any]
) -> None:
    """corral's token in a cluster it provisioned is its service account's, from the
    TokenRequest API, and lasts a year: a year on, corral would be locked out of every such
    cluster unless it asks again in time."""
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster_id = k3s_cluster["id"]
    name = names.credential_secret_name(cluster_id)
    now = datetime.datetime.now(datetime.UTC)

    # The same token, but expiring in ten days: signed with the cluster's service-account key,
    # so its apiserver takes it as it took the original.
    with operator_away(hosted):
        data = management.get(Secret, name, namespace=names.SYSTEM_NAMESPACE).data
        signing = management.get(Secret, "pki-apiserver", namespace=cluster_id).data["sa.key"]
        token = base64.b64decode(data["token"]).decode()
        soon = expiring_token(token, base64.b64decode(signing), now + datetime.timedelta(days=10))
        patch = {"data": {"token": base64.b64encode(soon.encode()).decode()}}
        management.patch(Secret, name, patch, namespace=names.SYSTEM_NAMESPACE)

    def renewed() -> datetime.datetime | None:
        data = management.get(Secret, name, namespace=names.SYSTEM_NAMESPACE).data
        expiry = agent_token.expires(base64.b64decode(data["token"]).decode())
        return expiry if expiry and expiry - now > datetime.timedelta(days=300) else None

    expiry = wait_for(f"corral's token for {cluster_id} asked again", renewed, 60)
    assert expiry - now < agent_token.LIFETIME + datetime.timedelta(minutes=5)
    assert hosted_api.get(f"/k8s/clusters/{cluster_id}/readyz").status == 200


def expiring_token(token: str, key: bytes, expires: datetime.datetime) -> str:
    """`token` with its `exp` moved to `expires`, signed again with `key` (the service-account
    key that signed it) under the same header."""
    header, payload, _ = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["exp"] = int(expires.timestamp())
    heading = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    return jose_jwt.encode(heading, claims, ECKey.import_key(key))


SCHEDULER = "kubeconfig-scheduler"


def scheduler_kubeconfig(management: Client, cluster_id: str) -> bytes:
    return base64.b64decode(
        management.get(Secret, SCHEDULER, namespace=cluster_id).data["kubeconfig"]
    )


def client_certificate(kubeconfig: bytes) -> x509.Certificate:
    user = yaml.safe_load(kubeconfig)["users"][0]["user"]
    return x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))


def expired(kubeconfig: bytes, ca: pki.KeyPair) -> bytes:
    """The kubeconfig with its client certificate issued again by `ca` for the same user and
    key, expired (`expired_again`)."""
    config = yaml.safe_load(kubeconfig)
    user = config["users"][0]["user"]
    key = base64.b64decode(user["client-key-data"])
    cert = expired_again(client_certificate(kubeconfig), key, ca)
    user["client-certificate-data"] = base64.b64encode(cert).decode()
    return yaml.safe_dump(config).encode()


def expired_again(old: x509.Certificate, key: bytes, ca: pki.KeyPair) -> bytes:
    """`old` issued again by `ca` for the same subject, key and extensions, as one issued a
    year ago would look: expired a minute ago (PEM)."""
    authority = x509.load_pem_x509_certificate(ca.cert)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(old.subject)
        .issuer_name(authority.subject)
        .public_key(pki.load_key(key).public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=365))
        .not_valid_after(now - datetime.timedelta(minutes=1))
    )
    for extension in old.extensions:
        builder = builder.add_extension(extension.value, extension.critical)
    return pki.cert_pem(builder.sign(pki.load_key(ca.key), hashes.SHA256()))


def rotate(api: Api, cluster_id: str, body: dict[str, Any], generation: int,
           shown: bool = True) -> tuple[float, dict[str, Any]]:  # fmt: skip
    """rotateCertificates, awaited until the generation is recorded and the cluster is Ready
    and Updated: the seconds it took, and the action's answer. `shown`: `Updated` was seen
    False `RotatingCertificates` on the way."""
    began = time.monotonic()
    answer = api.post(f"/v3/clusters/{cluster_id}?action=rotateCertificates", body)
    assert answer.status == 200, answer.body
    assert answer.body["type"] == "rotateCertificateOutput"
    updated: set[str] = set()

    def done() -> bool:
        cluster = api.get(f"/v3/clusters/{cluster_id}").body
        updated.add(condition(cluster, "Updated").get("reason", ""))
        provisioning = cluster["status"].get("provisioning") or {}
        return (
            provisioning.get("certificateRotationGeneration") == generation
            and condition(cluster, "Ready").get("status") == "True"
            and condition(cluster, "Updated").get("status") == "True"
        )

    wait_for(f"rotation {generation} of {cluster_id}", done, ROTATION_TIMEOUT)
    if shown:
        assert "RotatingCertificates" in updated, updated
    return time.monotonic() - began, answer.body


def management_cluster(client: Client, cluster_id: str) -> dict[str, Any]:
    return as_dict(client.get(kinds.Cluster, cluster_id))


def serving_serial(endpoint: str) -> int:
    """The serial of the certificate the apiserver serves, read from a TLS handshake."""
    url = urllib.parse.urlsplit(endpoint)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((url.hostname, url.port), timeout=10) as raw,
        context.wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def namespaces_as(config: dict[str, Any], ca: bytes) -> int:
    """The status of listing namespaces with a kubeconfig's client certificate, trusting `ca`
    for the server."""
    config = copy.deepcopy(config)
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(ca).decode()
    try:
        list(Client(KubeConfig.from_dict(config)).list(Namespace))
    except ApiError as exc:
        return int(exc.status.code or 0)
    return 200


class ReadyzPoller:
    """`/readyz` (or another `path`) of a cluster through corral's proxy, ten times a second on
    a thread: how often it failed and the longest stretch of failures."""

    def __init__(self, api: Api, cluster_id: str, path: str = "readyz") -> None:
        self.api = api
        self.path = f"/k8s/clusters/{cluster_id}/{path}"
        self.stop = threading.Event()
        self.polls = 0
        self.failures = 0
        self.longest_outage = 0.0
        self.seen: dict[str, int] = {}  # what the failures were, and how often
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __str__(self) -> str:
        return (
            f"/{self.path.split('/', 4)[-1]} through corral failed {self.failures} of "
            f"{self.polls} polls, longest "
            f"outage {self.longest_outage:.1f}s, failures: {self.seen}"
        )

    def __enter__(self) -> ReadyzPoller:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        failing_since: float | None = None
        while not self.stop.wait(0.1):
            now = time.monotonic()
            seen = self._poll()
            self.polls += 1
            if seen == "200":
                failing_since = None
                continue
            self.failures += 1
            self.seen[seen] = self.seen.get(seen, 0) + 1
            failing_since = now if failing_since is None else failing_since
            self.longest_outage = max(self.longest_outage, time.monotonic() - failing_since)

    def _poll(self) -> str:
        """The answer's status and code, or why there was none within a second (a poll that
        hangs is an outage too)."""
        request = urllib.request.Request(
            self.api.base + self.path, headers={"Authorization": f"Bearer {self.api.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=1, context=self.api.context) as answer:
                return str(answer.status)
        except urllib.error.HTTPError as exc:
            return f"{exc.code} {exc.read()[:80]!r}"
        except (OSError, TimeoutError) as exc:
            return type(exc).__name__


def anonymous(server: str, path: str, context: ssl.SSLContext) -> int:
    try:
        with urllib.request.urlopen(f"{server}{path}", timeout=10, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def absent(client: Client, kind: Any, name: str, namespace: str | None = None) -> bool:
    try:
        client.get(kind, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code == 404:
            return True
        raise
    return False


def ready_node(node: Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def privileged_pod(namespace: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="privileged", namespace=namespace),
        spec=PodSpec(containers=[Container(
            name="c", image="busybox", securityContext=SecurityContext(privileged=True))]),
    )  # fmt: skip


def deployment(namespace: str, name: str, replicas: int, cpu: str | None = None) -> Deployment:
    labels = {"app": name}
    requests = ResourceRequirements(requests={"cpu": cpu}) if cpu else None
    return Deployment(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=DeploymentSpec(
            replicas=replicas,
            selector=LabelSelector(matchLabels=labels),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=labels),
                spec=PodSpec(containers=[Container(name="web", image="nginx",
                                                   resources=requests)]),
            ),
        ),
    )  # fmt: skip


def available(client: Client, name: str) -> int:
    return client.get(Deployment, name, namespace="default").status.availableReplicas or 0


def ready_workers(client: Client) -> int:
    return sum(ready_node(n) for n in client.list(Node))


# -- etcd backups and restores --------------------------------------------------------------------

BACKUP_TIMEOUT = 120.0


def take_backup(api: Api, cluster_id: str) -> tuple[dict[str, Any], float]:
    """backupEtcd, awaited until its EtcdBackup has completed; the backup and the seconds."""
    began = time.monotonic()
    answer = api.post(f"/v3/clusters/{cluster_id}?action=backupEtcd", {})
    assert answer.status == 201, answer.body
    assert answer.body["type"] == "etcdBackup" and answer.body["clusterId"] == cluster_id
    backup_id = answer.body["id"]
    assert backup_id.startswith(f"{cluster_id}:")

    def done() -> dict[str, Any] | None:
        body = api.get(f"/v3/etcdbackups/{backup_id}").body
        return body if body.get("state") in ("active", "failed") else None

    backup = wait_for(f"backup {backup_id} completed", done, BACKUP_TIMEOUT)
    assert backup["state"] == "active", backup
    return backup, time.monotonic() - began


def config_map(name: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, namespace="default"), data={"k": name})


def test_an_rke2_cluster_is_restored_from_its_etcd_backup_and_refuses_anothers(
    hosted: Environment, hosted_api: Api, fleet: Fleet, rke2_cluster: dict[str, Any],
    k3s_cluster: dict[str, Any], tmp_path: Path,
) -> None:  # fmt: skip
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster, other = rke2_cluster, k3s_cluster
    cluster_id, other_id = cluster["id"], other["id"]
    downstream = kubeconfig_through_corral(hosted_api, cluster_id, hosted.ca_path, tmp_path / "kc")
    downstream.create(config_map("before-backup"))

    backup, backup_seconds = take_backup(hosted_api, cluster_id)
    assert backup["size"] > 0 and backup["revision"] > 0
    assert backup["filename"] == f"{backup['name']}.db"
    assert backup["location"] == f"pvc://{cluster_id}/etcd-backups/{backup['filename']}"
    assert backup["kubernetesVersion"] == "v1.36.3"
    assert backup["etcdVersion"].startswith("3.6")
    listed = hosted_api.get(f"/v3/etcdbackups?clusterId={cluster_id}").body["data"]
    assert [b["id"] for b in listed] == [backup["id"]]
    downstream.create(config_map("after-backup"))
    others_backup, _ = take_backup(hosted_api, other_id)

    # Another cluster's backup, by either name: 422 naming the field, and nothing written.
    for field, value in (("etcdBackupName", others_backup["name"]),
                         ("etcdBackupId", others_backup["id"])):  # fmt: skip
        refused = hosted_api.post(
            f"/v3/clusters/{cluster_id}?action=restoreFromEtcdBackup",
            {field: value, "restoreRkeConfig": ""},
        )
        assert refused.status == 422, refused.body
        assert refused.body["fieldName"] == field
    stored = management.get(kinds.Cluster, cluster_id)
    assert "etcdSnapshotRestore" not in stored.spec  # type: ignore[attr-defined]
    assert downstream.get(ConfigMap, "after-backup", namespace="default").data == {
        "k": "after-backup"
    }

    began = time.monotonic()
    answer = hosted_api.post(
        f"/v3/clusters/{cluster_id}?action=restoreFromEtcdBackup",
        {"etcdBackupName": backup["name"], "restoreRkeConfig": ""},
    )
    assert answer.status == 201, answer.body
    assert answer.body["spec"]["etcdSnapshotRestore"] == {
        "name": backup["name"],
        "generation": 1,
        "restoreRKEConfig": "",
    }
    phases: set[str] = set()

    def restoring() -> bool:
        body = hosted_api.get(f"/v3/clusters/{cluster_id}").body
        if condition(body, "Updated").get("reason") == "Restoring":
            phases.add(condition(body, "Updated")["message"])
        restore = ((body.get("status") or {}).get("provisioning") or {}).get("restore") or {}
        return restore.get("phase") == "Shutdown"

    # An operator killed in the middle: the next one resumes the same restore.
    wait_for("the restore stopping the control plane", restoring, 60)
    hosted.crash_operator()

    def restored() -> dict[str, Any] | None:
        body = hosted_api.get(f"/v3/clusters/{cluster_id}").body
        if condition(body, "Updated").get("reason") == "Restoring":
            phases.add(condition(body, "Updated")["message"])
        provisioning = (body.get("status") or {}).get("provisioning") or {}
        done = provisioning.get("restoreGeneration") == 1
        return body if done and condition(body, "Ready").get("status") == "True" else None

    after = wait_for(f"cluster {cluster_id} restored and Ready", restored, PROVISION_TIMEOUT)
    restore_seconds = time.monotonic() - began
    print(f"\netcd backup in {backup_seconds:.1f}s, restore to Ready in {restore_seconds:.1f}s")
    provisioning = after["status"]["provisioning"]
    assert provisioning["restore"]["phase"] == "Finished", provisioning
    assert provisioning["etcdDataDir"] == "data-1"
    assert phases, "Updated said Restoring while the restore ran"

    # The objects written after the backup are gone, those before it are there.
    assert absent(downstream, ConfigMap, "after-backup", "default")
    assert downstream.get(ConfigMap, "before-backup", namespace="default").data == {
        "k": "before-backup"
    }
    # Every watch ended with the compaction: corral's caches relisted and see what is new.
    downstream.create(Namespace(metadata=ObjectMeta(name="after-restore")))
    wait_for(
        "namespace after-restore in /v3",
        lambda: any(
            n["id"] == "after-restore"
            for n in hosted_api.get(f"/v3/clusters/{cluster_id}/namespaces").body["data"]
        ),
        60,
    )

    # Deleting both clusters leaves nothing: backups, claims, Jobs, pods.
    for gone in (cluster_id, other_id):
        fleet.delete(gone)
    for gone in (cluster_id, other_id):
        wait_for(f"namespace {gone} gone", lambda g=gone: absent(management, Namespace, g),
                 PROVISION_TIMEOUT)  # fmt: skip
        wait_for(
            f"the volumes of {gone} gone",
            lambda g=gone: not [v for v in management.list(PersistentVolume)
                                if v.spec.claimRef and v.spec.claimRef.namespace == g],
            60,
        )  # fmt: skip
        assert list(management.list(Pod, namespace="*", labels={names.LABEL_CLUSTER: gone})) == []
    assert hosted_api.get(f"/v3/etcdbackups/{backup['id']}").status == 404


# -- kubernetesVersion change ------------------------------------------------------------------

UPGRADE_TIMEOUT = 300.0


def test_a_version_change_rolls_the_control_plane_to_the_next_minor_while_corral_keeps_working(
    hosted: Environment, hosted_api: Api, fleet: Fleet, previous_rke2_cluster: dict[str, Any],
    tmp_path: Path,
) -> None:  # fmt: skip
    assert hosted.controlplane_image is not None and hosted.previous_controlplane_image is not None
    old, new = hosted.previous_controlplane_image.version, hosted.controlplane_image.version
    assert (old[:6], new) == ("v1.35.", "v1.36.3")
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster = previous_rke2_cluster
    cluster_id = cluster["id"]
    assert cluster["status"]["version"]["gitVersion"] == old
    assert cluster["status"]["provisioning"]["appliedVersion"] == old
    downstream = kubeconfig_through_corral(hosted_api, cluster_id, hosted.ca_path, tmp_path / "kc")
    downstream.create(config_map("before-upgrade"))

    # Bad versions change nothing: not in the catalog, two minors up, and (below) a downgrade.
    rolled_before = management.get(Deployment, "control-plane", namespace=cluster_id)
    refused = hosted_api.put(f"/v3/clusters/{cluster_id}", {"kubernetesVersion": "v1.36.99"})
    assert refused.status == 422 and refused.body["code"] == "InvalidOption", refused.body
    assert refused.body["fieldName"] == "kubernetesVersion"
    assert f"versions: {old}, {new}" in refused.body["message"]
    catalog_text = hosted_api.get("/v3/settings/kubernetes-version-catalog").body["value"]
    two_up = json.loads(catalog_text) | {"v1.37.0": json.loads(catalog_text)[new]}
    set_setting(hosted, "kubernetes-version-catalog", json.dumps(two_up))
    try:
        wait_for(
            "the catalog with v1.37.0 in corral",
            lambda: "v1.37.0" in hosted_api.get("/v3/settings/kubernetes-version-catalog").body[
                "value"],
            30,
        )  # fmt: skip
        skipped = hosted_api.put(f"/v3/clusters/{cluster_id}", {"kubernetesVersion": "v1.37.0"})
        assert skipped.status == 422 and skipped.body["code"] == "InvalidOption", skipped.body
        assert "one minor version at a time" in skipped.body["message"]
    finally:
        set_setting(hosted, "kubernetes-version-catalog", catalog_text)
    unchanged = management_cluster(management, cluster_id)
    assert unchanged["spec"]["kubernetesVersion"] == old
    assert unchanged["spec"]["rke2Config"]["kubernetesVersion"] == f"{old}+rke2r1"
    assert management.get(Deployment, "control-plane", namespace=cluster_id).metadata.generation \
        == rolled_before.metadata.generation  # fmt: skip

    # The roll: Updated False Upgrading with its progress, then True at the new version, with
    # corral's proxy polled all along.
    began = time.monotonic()
    progress: list[str] = []
    with (
        ReadyzPoller(hosted_api, cluster_id) as poller,
        ReadyzPoller(hosted_api, cluster_id, "api/v1/namespaces/default") as reader,
    ):
        asked = {"kubernetesVersion": f"{new}+rke2r1"}
        answer = hosted_api.put(f"/v3/clusters/{cluster_id}", asked)
        assert answer.status == 200, answer.body
        assert answer.body["kubernetesVersion"] == new
        moved = management_cluster(management, cluster_id)["spec"]
        assert (moved["kubernetesVersion"], moved["rke2Config"]["kubernetesVersion"]) == (
            new, f"{new}+rke2r1")  # fmt: skip

        def upgraded() -> bool:
            body = hosted_api.get(f"/v3/clusters/{cluster_id}").body
            updated = condition(body, "Updated")
            if updated.get("reason") == "Upgrading" and updated["message"] not in progress:
                progress.append(updated["message"])
            status = body["status"]
            return (
                (status.get("provisioning") or {}).get("appliedVersion") == new
                and status.get("version", {}).get("gitVersion") == new
                and updated.get("status") == "True"
                and condition(body, "Ready").get("status") == "True"
            )

        wait_for(f"{cluster_id} at {new}", upgraded, UPGRADE_TIMEOUT)
        seconds = time.monotonic() - began
    print(f"\nrke2 cluster {cluster_id}: {old} -> {new} in {seconds:.1f}s; {poller}; "
          f"{reader}; Updated said: {progress}")  # fmt: skip
    assert progress and all(m.startswith(f"{old} → {new}: ") for m in progress), progress
    assert any("updated" in m or "/version" in m for m in progress), progress
    version = hosted_api.get(f"/k8s/clusters/{cluster_id}/version")
    assert version.status == 200 and version.body["gitVersion"] == new, version.body
    pods = management.list(Pod, namespace=cluster_id, labels={
        "app.kubernetes.io/component": "control-plane"})  # fmt: skip
    # The old pod may still be terminating (its grace period), out of the Service already.
    # The apiserver is the pod's sidecar, among its init containers.
    images = {c.image for p in pods if not p.metadata.deletionTimestamp
              for c in p.spec.initContainers or [] if c.name == "kube-apiserver"}  # fmt: skip
    assert images == {hosted.controlplane_image.reference}
    # The same etcd: what was written before the roll is there after it.
    assert downstream.get(ConfigMap, "before-upgrade", namespace="default").data == {
        "k": "before-upgrade"}  # fmt: skip

    # A downgrade is refused and changes nothing.
    down = hosted_api.put(f"/v3/clusters/{cluster_id}", {"kubernetesVersion": old})
    assert down.status == 422 and "cannot go down" in down.body["message"], down.body
    assert management_cluster(management, cluster_id)["spec"]["kubernetesVersion"] == new
    fleet.delete(cluster_id)


@contextlib.contextmanager
def operator_away(hosted: Environment) -> Iterator[None]:
    """The operator stopped for the block, started again after it."""
    (operator,) = [p for p in hosted.corral if p.name == "operator"]
    operator.stop()
    try:
        yield
    finally:
        hosted.restart_operator("operator")


def expire_etcd_client(management: Client, cluster_id: str) -> str:
    """kube-apiserver's etcd client certificate replaced by an expired one from the cluster's
    etcd CA (the running kube-apiserver keeps the one it started with): when it expired."""
    etcd_ca = management.get(Secret, "pki-etcd-ca", namespace=cluster_id).data
    ca = pki.KeyPair(cert=base64.b64decode(etcd_ca["ca.crt"]),
                     key=base64.b64decode(etcd_ca["ca.key"]))  # fmt: skip
    stored = management.get(Secret, "pki-apiserver", namespace=cluster_id).data
    old = x509.load_pem_x509_certificate(base64.b64decode(stored["etcd-client.crt"]))
    cert = expired_again(old, base64.b64decode(stored["etcd-client.key"]), ca)
    data = {"etcd-client.crt": base64.b64encode(cert).decode()}
    management.patch(Secret, "pki-apiserver", {"data": data}, namespace=cluster_id)
    expiry = x509.load_pem_x509_certificate(cert).not_valid_after_utc
    return expiry.isoformat(timespec="seconds").replace("+00:00", "Z")


def assert_etcd_client_renewed(management: Client, cluster_id: str) -> None:
    renewed = management.get(Secret, "pki-apiserver", namespace=cluster_id).data
    fresh = x509.load_pem_x509_certificate(base64.b64decode(renewed["etcd-client.crt"]))
    left = fresh.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert left > datetime.timedelta(days=300)


def next_rotation(management: Client, cluster_id: str) -> int:
    asked = management_cluster(management, cluster_id)["spec"].get("rotateCertificates") or {}
    return int(asked.get("generation") or 0) + 1


def test_a_leaf_that_expired_before_a_version_change_is_renewed_by_the_same_roll(
    hosted: Environment, hosted_api: Api, fleet: Fleet, previous_k3s_cluster: dict[str, Any]
) -> None:
    """The roll of a version change starts a new kube-apiserver, which an expired etcd client
    certificate would keep from ever getting Ready: the renewal cannot wait for the roll to
    finish, so it joins it."""
    assert hosted.controlplane_image is not None
    new = hosted.controlplane_image.version
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    cluster_id = previous_k3s_cluster["id"]
    generation = next_rotation(management, cluster_id)

    # While the operator is down, the certificate expires and a user asks for the next version.
    with operator_away(hosted):
        stamp = expire_etcd_client(management, cluster_id)
        answer = hosted_api.put(f"/v3/clusters/{cluster_id}", {"kubernetesVersion": f"{new}+k3s1"})
        assert answer.status == 200, answer.body

    def done() -> bool:
        body = hosted_api.get(f"/v3/clusters/{cluster_id}").body
        status = body["status"]
        provisioning = status.get("provisioning") or {}
        return (
            provisioning.get("appliedVersion") == new
            and provisioning.get("certificateRotationGeneration") == generation
            and status.get("version", {}).get("gitVersion") == new
            and condition(body, "Ready").get("status") == "True"
            and condition(body, "Updated").get("status") == "True"
        )

    wait_for(f"{cluster_id} at {new} with its etcd client certificate renewed", done,
             UPGRADE_TIMEOUT)  # fmt: skip
    assert management_cluster(management, cluster_id)["spec"]["rotateCertificates"] == {
        "generation": generation, "caCertificates": False, "services": ["kube-apiserver"],
        "expires": stamp,
    }  # fmt: skip
    assert_etcd_client_renewed(management, cluster_id)
    version = hosted_api.get(f"/k8s/clusters/{cluster_id}/version")
    assert version.status == 200 and version.body["gitVersion"] == new, version.body
    fleet.delete(cluster_id)


# -- etcd backups to an S3-compatible target ---------------------------------------------------

S3_BUCKET = "etcd-backups"
S3_FOLDER = "corral/e2e"


class S3Target(NamedTuple):
    server: S3Server
    ca: Path  # the PEM of the CA of its serving certificate
    credential: str  # the id of a cloud credential of the server's keys

    @property
    def config(self) -> dict[str, Any]:
        """A cluster's `etcd.s3` naming the target."""
        return {
            "endpoint": self.server.endpoint,
            "bucket": S3_BUCKET,
            "folder": S3_FOLDER,
            "endpointCA": self.ca.read_text(),
            "cloudCredentialName": self.credential,
        }


@pytest.fixture(scope="module")
def s3_target(
    hosted: Environment, hosted_api: Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[S3Target]:
    """moto's S3 on the host's bridge address, which the node's pods dial, over HTTPS with a
    certificate of a CA of the test's own (the target's endpointCA), and a credential of its
    keys."""
    folder = tmp_path_factory.mktemp("s3")
    ca = pki.CertificateAuthority.create("s3-test-ca")
    serving = ca.issue_server("s3", [network.HOST_ADDRESS])
    (folder / "ca.crt").write_bytes(ca.cert_pem)
    (folder / "tls.crt").write_bytes(serving.cert)
    (folder / "tls.key").write_bytes(serving.key)
    server = S3Server(network.HOST_ADDRESS, free_port(), folder / "tls.crt", folder / "tls.key",
                      S3_BUCKET, folder / "moto.log")  # fmt: skip
    yield S3Target(server, folder / "ca.crt", s3_credential(hosted_api, server.keys))
    server.stop()


def s3_credential(api: Api, keys: Keys) -> str:
    created = api.post("/v3/cloudcredentials", {
        "type": "cloudCredential", "name": "etcd backups",
        "s3credentialConfig": {"accessKey": keys.access_key, "secretKey": keys.secret_key},
    })  # fmt: skip
    assert created.status == 201, created.body
    assert created.body["credentialFields"] == ["accessKey", "secretKey"]
    assert keys.secret_key not in json.dumps(created.body)
    return str(created.body["id"])


def fetch_object(devkube: Path, server: S3Server, ca: Path, key: str, folder: Path) -> Path:
    """The object as the bucket holds it, fetched with the same client the Jobs use."""
    (folder / "accessKey").write_text(server.keys.access_key)
    (folder / "secretKey").write_text(server.keys.secret_key)
    target = folder / "object.db"
    subprocess.run(
        [str(devkube), "etcd-s3", "download", f"--endpoint={server.endpoint}",
         f"--bucket={server.bucket}", f"--key={key}", f"--credentials={folder}",
         f"--ca={ca}", f"--file={target}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return target


def test_an_rke2_cluster_backs_up_to_s3_and_is_restored_from_there_renewing_an_expired_leaf(
    hosted: Environment, hosted_api: Api, fleet: Fleet, s3_target: S3Target,
    s3_rke2_cluster: dict[str, Any], devkube: Path, tmp_path: Path,
) -> None:  # fmt: skip
    management = Client(KubeConfig.from_file(hosted.management_kubeconfig))
    s3_server, ca, credential = s3_target
    target = s3_target.config

    # Refusals name the field and make nothing.
    for bad, field in (
        ({**target, "endpoint": "https://x"}, "endpoint"),
        ({**target, "cloudCredentialName": "cc-nosuch"}, "cloudCredentialName"),
    ):
        config = {"kubernetesVersion": "v1.36.3+rke2r1", "etcd": {"s3": bad}}
        refused = hosted_api.post(
            "/v3/clusters", {"type": "cluster", "name": "refused", "rke2Config": config}
        )
        assert refused.status == 422, refused.body
        assert refused.body["fieldName"] == f"rke2Config.etcd.s3.{field}"

    cluster = s3_rke2_cluster
    cluster_id = cluster["id"]
    downstream = kubeconfig_through_corral(hosted_api, cluster_id, hosted.ca_path, tmp_path / "kc")
    downstream.create(config_map("before-backup"))

    backup, backup_seconds = take_backup(hosted_api, cluster_id)
    key = f"{S3_FOLDER}/{backup['filename']}"
    assert backup["location"] == f"s3://{S3_BUCKET}/{key}"
    assert backup["s3"]["endpoint"] == s3_server.endpoint
    assert backup["s3"]["cloudCredentialName"] == credential
    fetched = fetch_object(devkube, s3_server, ca, key, tmp_path)
    assert fetched.stat().st_size == backup["s3"]["size"] > 0
    assert hashlib.sha256(fetched.read_bytes()).hexdigest() == backup["sha256"]
    # The Job's Secret of keys went with the Job.
    job = f"etcd-snapshot-{backup['name']}"
    wait_for(f"Secret {job}-s3 gone", lambda: absent(management, Secret, f"{job}-s3", cluster_id),
             60)  # fmt: skip
    downstream.create(config_map("after-backup"))

    # The restore fetches the file from S3: the claim's copy is removed first.
    claim = management.get(PersistentVolumeClaim, "etcd-backups", namespace=cluster_id)
    volume = management.get(PersistentVolume, claim.spec.volumeName)  # type: ignore[union-attr]
    (Path(volume.spec.hostPath.path) / backup["filename"]).unlink()  # type: ignore[union-attr]
    # Asked while the operator is away and kube-apiserver's etcd client certificate has
    # expired: the control plane the restore starts again could never get Ready with it, so
    # the renewal joins the restore rather than wait for it.
    generation = next_rotation(management, cluster_id)
    with operator_away(hosted):
        stamp = expire_etcd_client(management, cluster_id)
        began = time.monotonic()
        answer = hosted_api.post(f"/v3/clusters/{cluster_id}?action=restoreFromEtcdBackup",
                                 {"etcdBackupName": backup["name"]})  # fmt: skip
        assert answer.status == 201, answer.body

    def restored() -> dict[str, Any] | None:
        body = hosted_api.get(f"/v3/clusters/{cluster_id}").body
        provisioning = (body.get("status") or {}).get("provisioning") or {}
        if (provisioning.get("restore") or {}).get("phase") == "Failed":
            raise AssertionError(provisioning["restore"])
        done = (
            provisioning.get("restoreGeneration") == 1
            and provisioning.get("certificateRotationGeneration") == generation
        )
        return body if done and condition(body, "Ready").get("status") == "True" else None

    wait_for(f"cluster {cluster_id} restored from S3 and Ready", restored, PROVISION_TIMEOUT)
    restore_seconds = time.monotonic() - began
    print(f"\netcd backup to S3 in {backup_seconds:.1f}s ({backup['s3']['size']} bytes), "
          f"restore from S3 to Ready in {restore_seconds:.1f}s")  # fmt: skip
    assert management_cluster(management, cluster_id)["spec"]["rotateCertificates"] == {
        "generation": generation, "caCertificates": False, "services": ["kube-apiserver"],
        "expires": stamp,
    }  # fmt: skip
    assert_etcd_client_renewed(management, cluster_id)
    assert absent(downstream, ConfigMap, "after-backup", "default")
    assert downstream.get(ConfigMap, "before-backup", namespace="default").data == {
        "k": "before-backup"
    }

    # Deleting the backup removes its object first, then the record (the API forgets it at
    # once: the EtcdBackup itself is what the finalizer holds).
    assert hosted_api.delete(f"/v3/etcdbackups/{backup['id']}").status == 204
    wait_for(f"EtcdBackup {backup['name']} gone",
             lambda: absent(management, kinds.EtcdBackup, backup["name"], cluster_id),
             BACKUP_TIMEOUT)  # fmt: skip
    with pytest.raises(subprocess.CalledProcessError) as missing:
        fetch_object(devkube, s3_server, ca, key, tmp_path)
    assert b"does not exist" in missing.value.stderr

    # A wrong secret key: the backup fails saying why, and the key is nowhere to be read.
    wrong = f"wrong-{secrets.token_hex(16)}"
    changed = hosted_api.put(f"/v3/cloudcredentials/{credential}",
                             {"s3credentialConfig": {"secretKey": wrong}})  # fmt: skip
    assert changed.status == 200, changed.body
    answer = hosted_api.post(f"/v3/clusters/{cluster_id}?action=backupEtcd", {})
    assert answer.status == 201, answer.body

    def failed_backup() -> dict[str, Any] | None:
        body = hosted_api.get(f"/v3/etcdbackups/{answer.body['id']}").body
        assert body.get("state") != "active", body
        return body if body.get("state") == "failed" else None

    failed = wait_for("the backup with a wrong key failed", failed_backup, BACKUP_TIMEOUT)
    assert "signature we calculated does not match" in failed["transitioningMessage"], failed
    stored = as_dict(management.get(kinds.EtcdBackup, failed["name"], namespace=cluster_id))
    for secret in (wrong, s3_server.keys.secret_key):
        assert secret not in json.dumps(failed) and secret not in json.dumps(stored)
        for log in (hosted.root / "logs").rglob("*"):
            if log.is_file():
                assert secret not in log.read_text(errors="replace"), log

    fleet.delete(cluster_id)
