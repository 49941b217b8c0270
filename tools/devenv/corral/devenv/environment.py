"""The whole local stack: a management cluster, simulated downstream clusters, corral's CRDs,
operator and API server. `make run` and the end-to-end tests both drive this class.
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import secrets
import shutil
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from lightkube import codecs
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from corral.core import pki
from corral.core.kube import kinds
from corral.devenv import (
    clouddriver,
    host,
    hosted,
    images,
    network,
    nodeassets,
    realclusters,
    v3,
)
from corral.devenv.cloud import Cloud
from corral.devenv.controlplane import ControlPlane, Etcd, free_port
from corral.devenv.process import Process, stop_all
from corral.devenv.realnode import RealNode, prepare_host
from corral.devenv.waiting import wait_for

log = logging.getLogger(__name__)

# The name of the first simulated downstream cluster; later ones get a number.
DOWNSTREAM_NAME = "demo"
# The same for the provisioned clusters with real workers.
REAL_NAME = "real"
CRD_TIMEOUT = 60.0
CORRAL_TIMEOUT = 60.0
ADMIN_USERNAME = "admin"


@dataclass(frozen=True)
class Options:
    root: Path
    devkube: Path
    crds: Path
    downstream_clusters: int = 1
    nodes_per_cluster: int = 3
    api_port: int = 8443  # 0 picks a free port
    start_corral: bool = True
    # Real nodes (kubelet + containerd) of the management cluster; they need root and Linux.
    real_nodes: int = 0
    # False when something else installs the CRDs (the Helm chart, in its e2e test).
    apply_crds: bool = True
    # Write the management cluster's audit log of this namespace's service accounts.
    audit_namespace: str | None = None
    # Let provisioned clusters run their control planes as pods on the real nodes: the
    # control-plane image, a hostPath StorageClass, and the settings naming both (hosted.py).
    hosted_control_planes: bool = False
    # The slim devkube of the previous Kubernetes minor (tools/devkube/v1.35): with hosted
    # control planes, its image and a second catalog version, to upgrade clusters from.
    previous_devkube: Path | None = None
    # tools/netbins, built: with hosted control planes, the files real machines download
    # (nodeassets.py) are served at /assets/ and the catalog's version names them.
    netbins: Path | None = None
    # False: the management plane is etcd and kube-apiserver alone, for callers that need
    # only its API (the contract tests); nothing then schedules, collects garbage or runs nodes.
    controllers: bool = True
    # k3s clusters corral provisions, each with one real worker from the local cloud
    # (realclusters.py): what `make run` gives a newcomer to deploy on.
    real_clusters: int = 0
    # Operator replicas: they share the downstream clusters (docs/design/operator-sharding.md),
    # and the first is kopf's leader.
    operators: int = 1

    def __post_init__(self) -> None:
        if self.operators < 1:
            raise ValueError("at least one operator replica")
        if not self.controllers and (self.real_nodes or self.downstream_clusters):
            raise ValueError("nodes need the controllers: controllers=False takes no real "
                             "nodes and no downstream clusters")  # fmt: skip
        if self.hosted_control_planes and self.real_nodes < 1:
            raise ValueError(
                "hosted control planes need at least one real node to run their pods "
                "(real_nodes >= 1, `--real-nodes 1`)"
            )
        if self.real_clusters and not (self.hosted_control_planes and self.netbins):
            raise ValueError(
                "clusters with real workers need hosted control planes and the pod network's "
                "binaries (`--hosted-control-planes`, `make netbins`)"
            )


@dataclass
class Environment:
    options: Options
    etcd: Etcd | None = None
    management: ControlPlane | None = None
    downstreams: list[ControlPlane] = field(default_factory=list)
    corral: list[Process] = field(default_factory=list)
    real_nodes: list[RealNode] = field(default_factory=list)
    api_url: str = ""
    startup_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.root = self.options.root.resolve()
        self.pki_dir = self.root / "pki"
        self.env_file = self.root / "dev.env"
        # Node drivers' file urls may name files below this directory alone (a file url reads
        # with the operator's rights); the chart names none.
        self.driver_files = self.root / "driver-files"
        self._lock: int | None = None
        self._corral_env: dict[str, str] = {}
        # Where the API server listens and what its links name: with real nodes, the host's
        # bridge address, where machines reach it (the node command downloads from it), as
        # the pods on the real nodes reach the control planes.
        self._api_host = "127.0.0.1"
        self._replicas: dict[str, Process] = {}  # by URL, those add_apiserver_replica() started
        # The liveness endpoints of the operator replicas after the first, by process name.
        self.operator_replicas: dict[str, str] = {}
        self.cluster_ids: list[str] = []
        self.real_cluster_ids: list[str] = []
        self.controlplane_image: images.ControlPlaneImage | None = None
        self.previous_controlplane_image: images.ControlPlaneImage | None = None
        self.node_assets: nodeassets.NodeAssets | None = None
        self._host_changes = host.HostChanges()
        self._network = network.HostNetwork()
        # With real nodes, the local cloud makes machines beside them (cloud.py); its driver
        # executable is registered through /v3/nodedrivers like any user's.
        self.cloud = Cloud(self.root / "cloud")
        self.local_cloud_driver = self.driver_files / "local-cloud"
        self.local_cloud_checksum = ""

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Environment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        self._take_lock()
        self._clean()
        options = self.options

        bind = "127.0.0.1"
        if options.real_nodes:
            host.check_host()
            # Pods on the real nodes reach every plane (the management cluster's own and the
            # downstream clusters corral imports) at the host's bridge address.
            self._network.create()
            bind = network.HOST_ADDRESS
            self._api_host = network.HOST_ADDRESS
        if options.hosted_control_planes:
            # Recorded before kube-controller-manager starts, so that only what it adds goes.
            self._host_changes.filled_by_us(hosted.HOSTPATH_DIR)
        self.etcd = Etcd(options.devkube, self.root)
        self.etcd.wait_ready()
        self.management = ControlPlane(
            "management",
            options.devkube,
            self.root,
            self.etcd.url,
            bind_address=bind,
            audit_namespace=options.audit_namespace,
            hostpath_provisioner=options.hosted_control_planes,
        )
        self.downstreams = [
            ControlPlane(
                DOWNSTREAM_NAME if i == 0 else f"{DOWNSTREAM_NAME}{i + 1}",
                options.devkube,
                self.root,
                self.etcd.url,
                nodes=options.nodes_per_cluster,
                bind_address=bind,
            )
            for i in range(options.downstream_clusters)
        ]
        # Each step runs for every plane before the next step, so the slow parts (apiserver
        # start-up, node registration) of all clusters overlap.
        planes = [self.management, *self.downstreams]
        for plane in planes:
            plane.start()
        for plane in planes:
            plane.wait_apiserver()
        if options.controllers:
            for plane in planes:
                plane.start_controllers()
        if options.apply_crds:
            self.apply_crds()
        self._start_real_nodes()
        if options.real_nodes:
            self._open_cloud()
        if options.controllers:
            for plane in planes:
                plane.wait_ready()
        if options.hosted_control_planes:
            self._prepare_hosted_control_planes()
        self._publish_kubeconfigs()
        if options.start_corral:
            self._start_corral()
            if options.real_clusters:
                self._provision_real_clusters()
        self.startup_seconds = time.monotonic() - began
        self._write_env_file()
        log.info("environment up in %.1fs", self.startup_seconds)

    def stop(self) -> None:
        """Stop every process this environment started, layer by layer from the top: the
        processes of one layer stop in parallel, and nothing outlives what it depends on."""
        planes = [p for p in [self.management, *self.downstreams] if p]
        stop_all(self.corral)
        # Machines outlive whoever made them (the driver's runs): only this removes them.
        self.cloud.remove_all()
        for node in self.real_nodes:
            node.stop()
        stop_all(p for plane in planes for p in plane.controllers)
        stop_all(p for plane in planes for p in plane.apiserver)
        if self.etcd is not None:
            self.etcd.process.stop()
        self._network.delete()
        self._host_changes.undo()
        self.env_file.unlink(missing_ok=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def processes(self) -> list[Process]:
        planes = [p for p in [self.management, *self.downstreams] if p]
        etcd = [self.etcd.process] if self.etcd else []
        nodes = [p for node in self.real_nodes for p in node.processes]
        return [*etcd, *(p for plane in planes for p in plane.processes), *nodes, *self.corral]

    # -- steps ------------------------------------------------------------------------------

    def apply_crds(self) -> None:
        """Apply every manifest in the CRD folder and wait until each CRD is Established."""
        assert self.management is not None
        client = self.management.client()
        names: list[str] = []
        for path in sorted(self.options.crds.glob("*.yaml")):
            with path.open() as f:
                for obj in codecs.load_all_yaml(f):
                    client.apply(obj, field_manager="corral-devenv", force=True)
                    if isinstance(obj, CustomResourceDefinition):
                        names.append(obj.metadata.name)
        for name in names:
            client.wait(CustomResourceDefinition, name, for_conditions=["Established"])

    def _start_real_nodes(self) -> None:
        """Start the management cluster's real nodes; wait_ready() waits for them too."""
        if not self.options.real_nodes:
            return
        assert self.management is not None
        prepare_host(self._host_changes)
        image_dir = self.root / "images"
        image_dir.mkdir(parents=True, exist_ok=True)
        node_images = [("localhost/busybox", images.build_busybox(image_dir))]
        if self.options.hosted_control_planes:
            self.controlplane_image = images.build_controlplane(self.options.devkube)
            node_images.append(
                (self.controlplane_image.repository, self.controlplane_image.archive)
            )
            if self.options.previous_devkube is not None:
                previous = images.build_controlplane(
                    self.options.previous_devkube, images.PREVIOUS_COMMANDS
                )
                self.previous_controlplane_image = previous
                node_images.append((previous.repository, previous.archive))
            if self.options.netbins is not None:
                built = nodeassets.build(
                    self.options.devkube.with_name(nodeassets.NODE_BINARY), self.options.netbins
                )
                self.node_assets = nodeassets.served_from(built, self.root / "node-assets")
        for index in range(self.options.real_nodes):
            node = RealNode(f"management-real-{index}", index, self.management,
                            self.options.devkube)  # fmt: skip
            self.real_nodes.append(node)
            node.start(self._host_changes, self._network, node_images)
        self.management.real_node_names = [node.name for node in self.real_nodes]

    def _open_cloud(self) -> None:
        """Open the local cloud on the bridge, its route table made from the real nodes, and
        write its driver executable where file urls may point."""
        self.cloud.open(self._host_changes, host.own_memory_cgroup(),
                        self._network.machine_routes())  # fmt: skip
        self.local_cloud_checksum = clouddriver.write(self.local_cloud_driver, self.cloud.state)

    def _prepare_hosted_control_planes(self) -> None:
        assert self.management is not None
        client = self.management.client()
        client.apply(hosted.storage_class(), field_manager="corral-devenv", force=True)
        if self.options.apply_crds:
            self.apply_hosted_settings()

    def apply_hosted_settings(self) -> None:
        """Point corral's settings at the local control-plane image and StorageClass. Only the
        `value` is ours: the operator applies each setting's `default` with its own manager.
        Call it once the Setting CRD exists (start() does when it applies the CRDs)."""
        assert self.management is not None and self.controlplane_image is not None
        client = self.management.client()
        values = hosted.settings(
            self.controlplane_image, self.previous_controlplane_image, self.node_assets
        )
        for name, value in values.items():
            setting = kinds.Setting(metadata=ObjectMeta(name=name), value=value)
            client.apply(setting, field_manager="corral-devenv", force=True)

    def import_image(self, base_name: str, archive: Path) -> None:
        """Make an OCI archive's image available on every real node, as `<base_name>:<tag>`."""
        for node in self.real_nodes:
            node.import_image(base_name, archive)

    def _start_corral(self) -> None:
        assert self.management is not None
        ca = pki.CertificateAuthority.create("corral-dev-ca")
        self.ca_path, _ = ca.pair().write(self.pki_dir, "ca")
        cert, key = ca.issue_server(
            "corral", sorted({"127.0.0.1", "localhost", self._api_host})
        ).write(self.pki_dir, "corral")
        self.admin_password = secrets.token_urlsafe(18)
        self.driver_files.mkdir(parents=True, exist_ok=True)
        api_port = self.options.api_port or free_port()
        liveness_port = free_port()
        self.api_url = f"https://{self._api_host}:{api_port}"
        self.operator_liveness = f"http://127.0.0.1:{liveness_port}/healthz"
        env = {
            **os.environ,
            "KUBECONFIG": str(self.management.kubeconfig_path),
            "CORRAL_LISTEN": f"{self._api_host}:{api_port}",
            "CORRAL_TLS_CERT_FILE": str(cert),
            "CORRAL_TLS_KEY_FILE": str(key),
            "CORRAL_OPERATOR_LIVENESS": self.operator_liveness,
            "CORRAL_BOOTSTRAP_PASSWORD": self.admin_password,
            "CORRAL_CA_FILE": str(self.ca_path),
            # Every replica stands for the same service: links and kubeconfigs name the first.
            "CORRAL_EXTERNAL_URL": self.api_url,
            "CORRAL_DRIVER_FILE_DIR": str(self.driver_files),
        }
        if self.node_assets is not None:
            env["CORRAL_NODE_ASSET_DIR"] = str(self.node_assets.directory)
        self._corral_env = env
        self.corral = [self._operator_process("operator", self.operator_liveness)]
        for i in range(2, self.options.operators + 1):
            name = f"operator-{i}"
            self.operator_replicas[name] = f"http://127.0.0.1:{free_port()}/healthz"
            self.corral.append(self._operator_process(name, self.operator_replicas[name]))
        self._start_apiserver(api_port)
        context = ssl.create_default_context(cafile=str(self.ca_path))
        for liveness in [self.operator_liveness, *self.operator_replicas.values()]:
            self._wait_operator(liveness, self.corral)
        self.admin_token = self._admin_api_token(context)
        self.cluster_ids = [self._import(plane, context) for plane in self.downstreams]

    def _operator_process(self, name: str, liveness: str) -> Process:
        env = {
            **self._corral_env,
            "CORRAL_OPERATOR_LIVENESS": liveness,
            # Its name among the replicas, as the chart gives each its pod's name.
            "CORRAL_OPERATOR_IDENTITY": name,
            # The operator's own files (the node driver cache), gone with the environment.
            "CORRAL_OPERATOR_DATA_DIR": str(self.root / name),
        }
        if self.options.operators > 1:
            # The first replica is kopf's leader: priorities fall with the replica's number.
            number = int(name.rpartition("-")[2]) if "-" in name else 1
            env["CORRAL_OPERATOR_PRIORITY"] = str(self.options.operators - number + 1)
        return Process(name, [sys.executable, "-m", "corral.operator"],
                       self.root / "logs" / f"{name}.log", env=env)  # fmt: skip

    def _provision_real_clusters(self) -> None:
        assert self.controlplane_image is not None
        admin = realclusters.Admin(
            self.api_url, ssl.create_default_context(cafile=str(self.ca_path)), self.admin_token
        )
        names = [REAL_NAME if i == 0 else f"{REAL_NAME}{i + 1}"
                 for i in range(self.options.real_clusters)]  # fmt: skip
        driver = (f"file://{self.local_cloud_driver}", self.local_cloud_checksum)
        self.real_cluster_ids = realclusters.provision(
            admin, names, self.controlplane_image.version, driver, self.corral
        )

    def add_downstream(
        self, name: str, nodes: int = 2, stream_namespaces: Sequence[str] = ()
    ) -> ControlPlane:
        """Start one more simulated downstream cluster (not imported) and wait until Ready.
        The fake pods of `stream_namespaces` run what `exec` asks (`kwok.cluster_exec`)."""
        assert self.etcd is not None
        plane = ControlPlane(name, self.options.devkube, self.root, self.etcd.url, nodes=nodes,
                             stream_namespaces=stream_namespaces)  # fmt: skip
        self.downstreams.append(plane)
        plane.start()
        plane.wait_apiserver()
        plane.start_controllers()
        plane.wait_ready()
        return plane

    def remove_downstream(self, plane: ControlPlane) -> None:
        """Stop a cluster add_downstream() started, controllers before their apiserver; its
        objects stay in etcd, which nothing reads again."""
        stop_all(plane.controllers)
        stop_all(plane.apiserver)
        self.downstreams.remove(plane)

    def crash_operator(self) -> None:
        """KILL the operator, with no chance to finish what it is doing, and start it again,
        as a crash and its Deployment's restart would."""
        (old,) = [p for p in self.corral if p.name == "operator"]
        old.wait_or_kill(time.monotonic())
        self.restart_operator("operator")

    def restart_operator(self, name: str) -> Process:
        """Start an operator replica that has exited again, under its name (as its pod's
        restart would), and wait until it is live."""
        (old,) = [p for p in self.corral if p.name == name]
        liveness = self.operator_liveness if name == "operator" else self.operator_replicas[name]
        new = self._operator_process(name, liveness)
        self.corral[self.corral.index(old)] = new
        self._wait_operator(liveness, [new])
        return new

    def _wait_operator(self, liveness: str, processes: list[Process]) -> None:
        wait_for("corral operator liveness", lambda: v3.http_ok(liveness, None), CORRAL_TIMEOUT,
                 processes)  # fmt: skip

    def add_apiserver_replica(self, workers: int = 1) -> str:
        """Start one more API server replica on a free port, serving with `workers` processes,
        and return its URL."""
        url = self._start_apiserver(free_port(), workers)
        self._replicas[url] = self.corral[-1]
        return url

    def remove_apiserver_replica(self, url: str) -> None:
        """Stop a replica add_apiserver_replica() started, by the URL it returned."""
        replica = self._replicas.pop(url)
        replica.stop()
        self.corral.remove(replica)

    def apiserver_replica(self, url: str) -> Process:
        """The process of a replica add_apiserver_replica() started (with several workers,
        their supervisor)."""
        return self._replicas[url]

    def _start_apiserver(self, port: int, workers: int = 1) -> str:
        replicas = sum(p.name.startswith("apiserver") for p in self.corral)
        name = "apiserver" if replicas == 0 else f"apiserver-{replicas + 1}"
        env = {**self._corral_env, "CORRAL_LISTEN": f"{self._api_host}:{port}"}
        command = [sys.executable, "-m", "corral.apiserver", "--workers", str(workers)]
        process = Process(name, command,
                          self.root / "logs" / f"{name}.log", env=env)  # fmt: skip
        self.corral.append(process)
        url = f"https://{self._api_host}:{port}"
        context = ssl.create_default_context(cafile=str(self.ca_path))
        wait_for(f"corral {name} /readyz", lambda: v3.http_ok(f"{url}/readyz", context),
                 CORRAL_TIMEOUT, [process])  # fmt: skip
        return url

    def _import(self, plane: ControlPlane, context: ssl.SSLContext) -> str:
        """Import a downstream cluster through /v3, as a user would, and wait until Ready."""
        encoded = base64.b64encode(plane.kubeconfig_path.read_bytes()).decode()
        body = {"type": "cluster", "name": plane.name, "importedConfig": {"kubeConfig": encoded}}
        created = v3.post_json(f"{self.api_url}/v3/clusters", body, context, self.admin_token)
        cluster_id: str = created["id"]
        wait_for(
            f"cluster {plane.name} ({cluster_id}) Ready",
            lambda: (
                v3.get_json(f"{self.api_url}/v3/clusters/{cluster_id}", context, self.admin_token)[
                    "state"
                ]
                == "active"
            ),
            CORRAL_TIMEOUT,
            self.corral,
        )
        return cluster_id

    def _admin_api_token(self, context: ssl.SSLContext) -> str:
        """Log in as the bootstrapped admin, exactly as a client would, and create an API
        token for the developer."""
        credentials = {
            "username": ADMIN_USERNAME,
            "password": self.admin_password,
            "responseType": "json",
        }
        login = f"{self.api_url}/v3-public/localProviders/local?action=login"
        session = wait_for(
            "admin login",
            lambda: v3.post_json(login, credentials, context).get("token"),
            CORRAL_TIMEOUT,
            self.corral,
        )
        created = v3.post_json(
            f"{self.api_url}/v3/token", {"description": "corral-dev: make run"}, context, session
        )
        token: str = created["token"]
        return token

    def _publish_kubeconfigs(self) -> None:
        """Copy kubeconfigs to the places the `make run` contract names."""
        assert self.management is not None
        shutil.copy2(self.management.kubeconfig_path, self.management_kubeconfig)
        for plane in self.downstreams:
            target = self.root / "downstream" / f"{plane.name}.kubeconfig"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(plane.kubeconfig_path, target)

    @property
    def management_kubeconfig(self) -> Path:
        return self.root / "management.kubeconfig"

    def downstream_kubeconfigs(self) -> list[Path]:
        return [self.root / "downstream" / f"{p.name}.kubeconfig" for p in self.downstreams]

    def _write_env_file(self) -> None:
        lines = {
            "KUBECONFIG": str(self.management_kubeconfig),
            "CORRAL_DOWNSTREAM_KUBECONFIGS": ":".join(map(str, self.downstream_kubeconfigs())),
        }
        if self.corral:
            lines |= {
                "CORRAL_URL": self.api_url,
                "CORRAL_CA": str(self.ca_path),
                "CORRAL_TOKEN": self.admin_token,
                "CORRAL_ADMIN_USER": ADMIN_USERNAME,
                "CORRAL_ADMIN_PASSWORD": self.admin_password,
                "CORRAL_DOWNSTREAM_CLUSTER_IDS": ":".join(self.cluster_ids),
                "CORRAL_REAL_CLUSTER_IDS": ":".join(self.real_cluster_ids),
                "CORRAL_OPERATOR_LIVENESS": self.operator_liveness,
            }
        if self.real_nodes:
            lines["CORRAL_WORKLOAD_IMAGE"] = images.BUSYBOX_IMAGE
        text = "".join(f"{key}={value}\n" for key, value in lines.items())
        pki.write_private(self.env_file, text.encode())

    # -- housekeeping -----------------------------------------------------------------------

    def _take_lock(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(f"another corral environment is running in {self.root}") from None
        self._lock = fd

    def _clean(self) -> None:
        """Every start is a fresh cluster: drop what a previous run left in the folder, the
        machines of a run that was killed first."""
        self.cloud.remove_all()
        for name in ["etcd", "clusters", "downstream", "pki", "logs", "images", "cloud"]:
            shutil.rmtree(self.root / name, ignore_errors=True)
        for name in ["management.kubeconfig", "dev.env"]:
            (self.root / name).unlink(missing_ok=True)
