"""What `/v3/connect/register` answers a machine (docs/design/real-machines.md,
"POST /v3/connect/register"): a tar of the files the installer writes under NODE_DIR.

- `bootstrap.kubeconfig`: the cluster's server and CA with the machine's join token; the
  kubelet makes its key and asks for its certificate with it (TLS bootstrap);
- `ca.crt`: the cluster's CA, which the kubelet checks clients against;
- `kubelet.yaml`: a KubeletConfiguration that bootstraps and rotates its client and serving
  certificates, with the cgroup driver and containerd socket the installer was given;
- `kubelet.args`: the flags that are the machine's own (one a line);
- `kube-proxy.yaml`: kube-proxy with the kubelet's credential once it has one;
- `assets`: one line per download, `<name> <sha256> <url>`.

Everything is text of bounded size built in memory: a few kilobytes, so it is made on the
event loop.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from corral.core import kubeconfig
from corral.core.api import names
from corral.core.provisioning.manifests import CLUSTER_CIDR

NODE_DIR = "/var/lib/corral-node"
CGROUP_DRIVERS = ("systemd", "cgroupfs")
DEFAULT_SOCKET = "/run/containerd/containerd.sock"
# The names of the files in the tar, and of the downloads in `assets`.
FILES = ("bootstrap.kubeconfig", "ca.crt", "kubelet.yaml", "kubelet.args", "kube-proxy.yaml",
         "assets")  # fmt: skip
ASSETS = ("kubelet", "kube-proxy", "cni-plugins", "images")
# The kubeconfig the kubelet writes once its client certificate is issued; kube-proxy uses it.
KUBELET_KUBECONFIG = f"{NODE_DIR}/kubelet.kubeconfig"
CERT_DIR = f"{NODE_DIR}/pki"


@dataclass(frozen=True)
class Asset:
    """One download of a version's node section: where from and the sha256 it must have."""

    name: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Machine:
    """The machine as it registered, checked."""

    hostname: str
    record: str  # its Node CR's name, the label its node carries
    address: str = ""
    internal_address: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, str]] = ()
    cgroup_driver: str = "systemd"
    cgroup_root: str = ""
    containerd_socket: str = DEFAULT_SOCKET


@dataclass(frozen=True)
class Cluster:
    server: str
    ca: bytes  # PEM


def files(machine: Machine, cluster: Cluster, join_token: str,
          assets: Sequence[Asset]) -> dict[str, bytes]:  # fmt: skip
    bootstrap = kubeconfig.build(
        "bootstrap", cluster.server, cluster.ca, kubeconfig.Credentials(token=join_token)
    )
    return {
        "bootstrap.kubeconfig": _yaml(bootstrap),
        "ca.crt": cluster.ca,
        "kubelet.yaml": _yaml(kubelet_config(machine)),
        "kubelet.args": "".join(f"{arg}\n" for arg in kubelet_args(machine)).encode(),
        "kube-proxy.yaml": _yaml(proxy_config(machine)),
        "assets": "".join(f"{a.name} {a.sha256} {a.url}\n" for a in assets).encode(),
    }


def tar(contents: Mapping[str, bytes]) -> bytes:
    """An uncompressed tar of the files, each mode 0600 (the join token is a secret)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in contents.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def kubelet_config(machine: Machine) -> dict[str, object]:
    config: dict[str, object] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": machine.cgroup_driver,
        # Machines without systemd (and the local environment's) still run cgroup v1.
        "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{machine.containerd_socket}",
        "imageServiceEndpoint": f"unix://{machine.containerd_socket}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": f"{NODE_DIR}/ca.crt"},
        },
        "authorization": {"mode": "Webhook"},
        # Both certificates come from CSRs corral approves (docs/design/real-machines.md,
        # "The kubelet's credential") and are renewed the same way.
        "serverTLSBootstrap": True,
        "rotateCertificates": True,
        "readOnlyPort": 0,
        "failSwapOn": False,
        "staticPodPath": "",
        "podLogsDir": f"{NODE_DIR}/pod-logs",
        "clusterDomain": "cluster.local",
        "registerWithTaints": [dict(t) for t in machine.taints],
    }
    if machine.cgroup_root:
        config["cgroupRoot"] = machine.cgroup_root
    return config


def kubelet_args(machine: Machine) -> list[str]:
    """What only flags say: the node's name, address and labels (the machine's record among
    them, which the node mirror finds the record by)."""
    labels = {**machine.labels, names.LABEL_MACHINE: machine.record}
    args = [
        f"--hostname-override={machine.hostname}",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
    ]
    node_ip = machine.internal_address or machine.address
    if node_ip:
        args.append(f"--node-ip={node_ip}")
    return args


def proxy_config(machine: Machine) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": KUBELET_KUBECONFIG},
        "hostnameOverride": machine.hostname,
        "clusterCIDR": CLUSTER_CIDR,
    }


def _yaml(document: object) -> bytes:
    return yaml.safe_dump(document, sort_keys=False).encode()
