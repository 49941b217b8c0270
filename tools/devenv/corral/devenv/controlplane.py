"""One Kubernetes control plane from the devkube binary, and the etcd the planes share.

Each plane has its own PKI and its own key prefix in the shared etcd, which saves one etcd
process (and its memory) per cluster without letting clusters see each other's data.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import socket
import ssl
import subprocess
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from lightkube import Client, KubeConfig
from lightkube.models.core_v1 import NodeSpec, NodeStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, ServiceAccount

from corral.core import kubeconfig, pki
from corral.devenv import kwok
from corral.devenv.process import Process, stop_all
from corral.devenv.waiting import wait_for

log = logging.getLogger(__name__)

APISERVER_TIMEOUT = 120.0
NODES_TIMEOUT = 120.0

# Capacity of every fake node: the shape of a small real VM, so that sums and quotas look real.
NODE_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
NODE_ALLOCATABLE = {"cpu": "3800m", "memory": "15Gi", "pods": "110", "ephemeral-storage": "95Gi"}
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def advertise_address() -> str:
    """A non-loopback address of this host for kube-apiserver to advertise.

    kube-apiserver rejects loopback addresses here, and clients never dial this address, so
    when the host has none (no network at all) any private address does.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            # connect() on UDP only selects a route and source address; nothing is sent.
            s.connect(("192.0.2.1", 9))
            address: str = s.getsockname()[0]
    except OSError:
        return "10.255.255.254"
    return address if not address.startswith("127.") else "10.255.255.254"


class Etcd:
    """A single-member etcd for tests and development (no fsync: speed over durability)."""

    def __init__(self, devkube: Path, root: Path, enter: Sequence[str] = ()) -> None:
        self.client_port = free_port()
        peer = f"http://127.0.0.1:{free_port()}"
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.process = Process(
            "etcd",
            [
                *enter,
                str(devkube),
                "etcd",
                "--name=corral",
                f"--data-dir={root / 'etcd'}",
                f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=corral={peer}",
                "--unsafe-no-fsync",
                "--quota-backend-bytes=4294967296",
                "--auto-compaction-retention=1",
                "--log-level=warn",
            ],
            root / "logs" / "etcd.log",
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        def healthy() -> bool:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:  # noqa: S310
                return b'"health":"true"' in response.read()

        wait_for("etcd health", healthy, timeout, watch=[self.process])


@dataclass
class ControlPlane:
    """A cluster: kube-apiserver, kube-controller-manager, kube-scheduler and, with fake
    nodes, kwok. Use start() then wait_ready(); both planes' steps can be interleaved."""

    name: str
    devkube: Path
    root: Path
    etcd_url: str
    nodes: int = 0
    # 127.0.0.1 unless real nodes run: their pods reach the planes at the host's bridge address.
    bind_address: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    apiserver: list[Process] = field(default_factory=list)
    controllers: list[Process] = field(default_factory=list)
    # Service accounts' namespace whose API requests kube-apiserver writes to audit.log
    # (metadata only): what corral's pods really call, to hold their RBAC against.
    audit_namespace: str | None = None
    # Nodes run by a kubelet (realnode.py), awaited by wait_ready() beside the kwok ones.
    real_node_names: list[str] = field(default_factory=list)
    # kube-controller-manager provisions hostPath volumes under /tmp/hostpath_pv (for hosted
    # control planes' etcd; it works with one node only, which is all a development host has).
    hostpath_provisioner: bool = False
    # A prefix that starts the plane's processes elsewhere (isolated.py: in a network namespace).
    enter: Sequence[str] = ()
    # Namespaces whose fake pods run what `exec` asks, on this host (kwok.cluster_exec), and
    # forward a pod port to a port of this host's loopback (pod port -> local port).
    stream_namespaces: Sequence[str] = ()
    port_forwards: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dir = self.root / "clusters" / self.name
        self.pki_dir = self.dir / "pki"
        self.kubeconfig_path = self.dir / "admin.kubeconfig"
        self.server = f"https://{self.bind_address}:{self.port}"

    # -- start-up ---------------------------------------------------------------------------

    def start(self) -> None:
        """Write the PKI and start kube-apiserver; controllers follow in start_controllers()."""
        loopback = self.bind_address.startswith("127.")
        address = advertise_address() if loopback else self.bind_address
        ca = pki.CertificateAuthority.create(f"{self.name}-ca")
        self.ca = ca
        self.ca_path, _ = ca.pair().write(self.pki_dir, "ca")
        serving = ca.issue_server(
            "kube-apiserver",
            [
                "127.0.0.1",
                "localhost",
                address,
                self.bind_address,
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )
        cert, key = serving.write(self.pki_dir, "apiserver")
        admin = ca.issue_client("admin", ["system:masters"])
        sa_key = self.pki_dir / "sa.key"
        pki.write_private(sa_key, pki.key_pem(pki.new_key()))
        config = kubeconfig.build(
            self.name,
            self.server,
            ca.cert_pem,
            kubeconfig.Credentials(client_cert=admin.cert, client_key=admin.key),
        )
        pki.write_private(self.kubeconfig_path, kubeconfig.dump(config).encode())
        self._client_cert = admin.write(self.pki_dir, "admin")
        # kube-apiserver's own identity towards kubelets (logs, exec, port-forward).
        kubelet_cert, kubelet_key = ca.issue_client(
            "kube-apiserver-kubelet-client", ["system:masters"]
        ).write(self.pki_dir, "apiserver-kubelet-client")

        self._apiserver_args = [
            f"--etcd-servers={self.etcd_url}",
            f"--etcd-prefix=/clusters/{self.name}/registry",
            f"--bind-address={self.bind_address}",
            f"--secure-port={self.port}",
            f"--advertise-address={address}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
            f"--client-ca-file={self.ca_path}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--kubelet-client-certificate={kubelet_cert}",
            f"--kubelet-client-key={kubelet_key}",
            f"--kubelet-certificate-authority={self.ca_path}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_key}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # A development box has one client per cluster at most: take the brakes off.
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            "--profiling=false",
            "--v=1",
        ]
        if self.audit_namespace:
            self._apiserver_args += self._audit_args(self.audit_namespace)
        self.start_apiserver()

    @property
    def audit_log(self) -> Path:
        return self.dir / "audit.log"

    def _audit_args(self, namespace: str) -> list[str]:
        policy = {
            "apiVersion": "audit.k8s.io/v1",
            "kind": "Policy",
            "omitStages": ["RequestReceived"],
            "rules": [
                {"level": "Metadata", "userGroups": [f"system:serviceaccounts:{namespace}"]},
                {"level": "None"},
            ],
        }
        path = self.dir / "audit-policy.yaml"
        path.write_text(json.dumps(policy))
        return [
            f"--audit-policy-file={path}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ]

    def start_apiserver(self) -> None:
        """Start (or restart, after stop_apiserver) kube-apiserver on the same port."""
        self.apiserver.clear()
        self._spawn(self.apiserver, "kube-apiserver", self._apiserver_args)

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver alone: the cluster becomes unreachable, its state stays."""
        stop_all(self.apiserver)

    def wait_apiserver(self) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.load_cert_chain(*map(str, self._client_cert))

        def ready() -> bool:
            request = urllib.request.Request(f"{self.server}/readyz")  # noqa: S310
            with urllib.request.urlopen(request, timeout=5, context=context) as response:  # noqa: S310
                return bool(response.status == 200)

        wait_for(f"{self.name} kube-apiserver /readyz", ready, APISERVER_TIMEOUT, self.processes)

    def start_controllers(self) -> None:
        common = [
            f"--kubeconfig={self.kubeconfig_path}",
            "--leader-elect=false",
            "--secure-port=0",
            "--kube-api-qps=1000",
            "--kube-api-burst=2000",
        ]
        controller_manager = [
            *common,
            f"--root-ca-file={self.ca_path}",
            f"--service-account-private-key-file={self.pki_dir / 'sa.key'}",
            "--use-service-account-credentials=true",
        ]
        if self.hostpath_provisioner:
            controller_manager.append("--enable-hostpath-provisioner")
        self._spawn(self.controllers, "kube-controller-manager", controller_manager)
        self._spawn(self.controllers, "kube-scheduler", common)
        if self.nodes:
            self._start_kwok()

    def _start_kwok(self) -> None:
        kwok_dir = self.dir / "kwok"
        kwok_dir.mkdir(parents=True, exist_ok=True)
        stages = kwok_dir / "stages.yaml"
        stages.write_bytes(
            subprocess.run(
                [str(self.devkube), "kwok-stages"], check=True, capture_output=True
            ).stdout
        )
        logs_file = kwok_dir / "simulated-pod.log"
        logs_file.write_text(kwok.cri_log(kwok.SIMULATED_LOG, datetime.datetime.now(datetime.UTC)))
        streams = kwok_dir / "streams.yaml"
        documents = [kwok.cluster_logs(logs_file)]
        if self.stream_namespaces:
            documents.append(kwok.cluster_exec(self.stream_namespaces))
        if self.stream_namespaces and self.port_forwards:
            documents.append(kwok.cluster_port_forward(self.stream_namespaces, self.port_forwards))
        streams.write_text(yaml.safe_dump_all(documents))
        # kube-apiserver verifies its "kubelets" against the cluster's CA
        # (--kubelet-certificate-authority), and reaches kwok's at the node's InternalIP.
        cert, key = self.ca.issue_server("kwok", ["127.0.0.1", "localhost"]).write(
            kwok_dir, "kwok-serving"
        )
        port = free_port()
        self._spawn(
            self.controllers,
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig_path}",
                f"--config={stages}",
                f"--config={streams}",
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                "--node-ip=127.0.0.1",
                "--node-name=localhost",
                f"--node-port={port}",
                f"--server-address=127.0.0.1:{port}",
                "--cidr=10.244.0.0/16",
                "--node-lease-duration-seconds=40",
            ],
            home=kwok_dir,
        )  # HOME keeps kwok from loading a ~/.kwok/kwok.yaml of the user's

    def wait_ready(self) -> None:
        """Controllers are working (the default service account exists) and nodes are Ready."""
        client = self.client()
        wait_for(
            f"{self.name} default service account",
            lambda: client.get(ServiceAccount, "default", namespace="default"),
            APISERVER_TIMEOUT,
            self.processes,
        )
        for index in range(self.nodes):
            client.apply(self._fake_node(index), field_manager="corral-devenv")
        names = [self._node_name(index) for index in range(self.nodes)] + self.real_node_names
        for name in names:
            wait_for(
                f"{self.name} node {name} Ready",
                lambda n=name: _node_ready(client.get(Node, n)),  # type: ignore[misc]
                NODES_TIMEOUT,
                self.processes,
            )

    # -- running ----------------------------------------------------------------------------

    def client(self) -> Client:
        return Client(KubeConfig.from_file(self.kubeconfig_path), field_manager="corral-devenv")

    @property
    def processes(self) -> list[Process]:
        return [*self.apiserver, *self.controllers]

    def _spawn(
        self, group: list[Process], component: str, args: list[str], home: Path | None = None
    ) -> None:
        env = None if home is None else {**os.environ, "HOME": str(home)}
        group.append(
            Process(
                f"{self.name}/{component}",
                [*self.enter, str(self.devkube), component, *args],
                self.root / "logs" / f"{self.name}-{component}.log",
                env=env,
            )
        )

    def _node_name(self, index: int) -> str:
        return f"{self.name}-node-{index}"

    def _fake_node(self, index: int) -> Node:
        name = self._node_name(index)
        return Node(
            metadata=ObjectMeta(
                name=name,
                annotations={KWOK_NODE_ANNOTATION: "fake"},
                labels={
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node-role.kubernetes.io/worker": "true",
                    "type": "kwok",
                },
            ),
            spec=NodeSpec(providerID=f"kwok://{self.name}/{name}"),
            status=NodeStatus(capacity=dict(NODE_CAPACITY), allocatable=dict(NODE_ALLOCATABLE)),
        )


def _node_ready(node: Node) -> bool:
    conditions = (node.status and node.status.conditions) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
