"""A real Kubernetes node: containerd, runc, the kubelet and kube-proxy running real containers.

Everything a node changes stays inside namespaces it owns, so the host is left as found:

- a private **mount** namespace, where regular files are bind-mounted over the kernel settings
  the kubelet would otherwise rewrite host-wide (`kernel.panic_on_oops`, `vm.overcommit_memory`,
  ...), a tmpfs covers /run (runc's shim state, the iptables lock) and the kubelet's, CNI's and
  container logs' fixed paths are bind mounts of folders under the node's own directory;
- a **network** namespace, linked to the host's bridge by a veth (network.py): the pod bridge,
  `ip_forward` and kube-proxy's iptables rules exist only there;
- a **cgroup** subtree below this process's own memory cgroup, so pods are limited and counted
  with whatever runs the environment.

The namespaces are held by one `sleep` process; containerd, the kubelet and kube-proxy are
started into them with nsenter. Stopping the node stops those by PID, kills the container
processes left in its cgroups, and lets the namespaces (and every mount in them) go with the
holder. Facts behind each setting: shared/reference/real-node.md.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from corral.core import kubeconfig, pki
from corral.devenv import network
from corral.devenv.controlplane import ControlPlane
from corral.devenv.host import (
    CNI_PLUGINS,
    HostChanges,
    kill_until_gone,
    make_cgroup_root,
    own_memory_cgroup,
    pids_in_cgroup,
    pids_in_namespace,
    run,
)
from corral.devenv.images import BUSYBOX_IMAGE
from corral.devenv.process import Process, stop_all
from corral.devenv.runtime import containerd_config, fake_kernel_settings
from corral.devenv.waiting import wait_for

log = logging.getLogger(__name__)

START_TIMEOUT = 60.0
KUBELET_PORT = 10250
# Host paths the kubelet, CNI and the CRI use whatever their configuration says.
FIXED_PATHS = {
    "kubelet": Path("/var/lib/kubelet"),
    "cni-results": Path("/var/lib/cni"),
    "container-logs": Path("/var/log/containers"),
}

NEW_NAMESPACES = ["unshare", "--mount", "--net", "--propagation", "private", "--"]


def holder_script(folder: Path) -> str:
    """Runs as `unshare -m -n --propagation private -- sh -c <script>` and holds the node's
    namespaces; `folder` is the node's own directory."""
    d = shlex.quote(str(folder))
    return "\n".join(
        [
            "set -eu",
            *fake_kernel_settings(folder / "kernel"),
            "mount -t tmpfs -o mode=0755 tmpfs /run",
            f"mount --bind {d}/kubelet /var/lib/kubelet",
            f"mount --bind {d}/cni-results /var/lib/cni",
            f"mount --bind {d}/container-logs /var/log/containers",
            "ip link set lo up",
            "echo 1 > /proc/sys/net/ipv4/ip_forward",
            f"touch {d}/namespace.ready",
            "exec sleep infinity",
        ]
    )


def prepare_host(changes: HostChanges) -> None:
    """The empty folders the nodes' bind mounts cover (made once, for every node)."""
    for path in FIXED_PATHS.values():
        changes.mkdir(path)


@dataclass
class RealNode:
    """One real node of `plane`, numbered `index` among the environment's real nodes."""

    name: str
    index: int
    plane: ControlPlane
    devkube: Path
    processes: list[Process] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.dir = self.plane.dir / "nodes" / self.name
        self.address = network.node_address(self.index)
        self.pod_cidr = network.pod_cidr(self.index)
        # Inside the node's mount namespace (its own /run): unix socket paths are short.
        self.socket = Path("/run/corral/containerd.sock")
        self.cgroup_root = f"{own_memory_cgroup().rstrip('/')}/corral-node-{self.name}"
        self.holder: Process | None = None
        self.logs = self.plane.root / "logs"

    # -- start-up ---------------------------------------------------------------------------

    def start(
        self,
        changes: HostChanges,
        net: network.HostNetwork,
        images: Sequence[tuple[str, Path]],
    ) -> None:
        self._write_files()
        make_cgroup_root(changes, self.cgroup_root)
        self.holder = Process(
            f"{self.name}/namespaces",
            [*NEW_NAMESPACES, "sh", "-c", holder_script(self.dir)],
            self.logs / f"{self.name}-namespaces.log",
        )
        wait_for(
            f"{self.name} namespaces",
            (self.dir / "namespace.ready").exists,
            START_TIMEOUT,
            [self.holder],
        )
        net.attach(self.index, self.holder.pid)
        self._spawn("containerd", ["containerd", "--config", str(self.dir / "containerd.toml")])
        wait_for(
            f"{self.name} containerd", lambda: self.ctr("version"), START_TIMEOUT, self.processes
        )
        for base_name, archive in images:
            self.import_image(base_name, archive)
        self._spawn(
            "kubelet",
            [
                str(self.devkube),
                "kubelet",
                f"--config={self.dir / 'kubelet.yaml'}",
                f"--kubeconfig={self.dir / 'kubelet.kubeconfig'}",
                f"--node-ip={self.address}",
                f"--hostname-override={self.name}",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-proxy",
            [str(self.devkube), "kube-proxy", f"--config={self.dir / 'kube-proxy.yaml'}"],
        )

    def import_image(self, base_name: str, archive: Path) -> None:
        """Import an OCI archive as `<base_name>:<tag>`, the tag being its `ref.name`."""
        began = time.monotonic()
        self.ctr("-n", "k8s.io", "images", "import", "--base-name", base_name, str(archive))
        log.info("%s: imported %s in %.1fs", self.name, base_name, time.monotonic() - began)

    def ctr(self, *args: str) -> str:
        assert self.holder is not None
        return run(
            [
                "nsenter",
                "-t",
                str(self.holder.pid),
                "-m",
                "--",
                "ctr",
                "-a",
                str(self.socket),
                *args,
            ]
        )

    def _spawn(self, component: str, argv: list[str]) -> None:
        assert self.holder is not None
        self.processes.append(
            Process(
                f"{self.name}/{component}",
                ["nsenter", "-t", str(self.holder.pid), "-m", "-n", "--", *argv],
                self.logs / f"{self.name}-{component}.log",
                env={
                    "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
                    "HOME": str(self.dir),
                },
            )
        )

    # -- stopping ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the node's processes and its containers; the namespaces go with the holder."""
        stop_all(self.processes, grace=10.0)
        self._kill_containers()
        if self.holder is not None:
            self.holder.stop()

    def _kill_containers(self) -> None:
        # containerd's shims and the containers they started are not children of anything
        # stopped above: they are found as the processes inside the node's cgroup subtree
        # and inside its mount namespace, both of which only this node's processes enter.
        holder = self.holder

        def remains() -> set[int]:
            inside = set()
            if holder is not None and holder.running():
                inside = pids_in_namespace(holder.pid, "mnt")
            return pids_in_cgroup(self.cgroup_root) | inside

        kill_until_gone(self.name, remains)

    # -- configuration ----------------------------------------------------------------------

    def _write_files(self) -> None:
        for sub in (
            "kernel",
            "containerd",
            "cni",
            "cni-ipam",
            "pod-logs",
            "volume-plugins",
            *FIXED_PATHS,
        ):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        ca = self.plane.ca
        node_cert = ca.issue_client(f"system:node:{self.name}", ["system:nodes"])
        self._kubeconfig("kubelet.kubeconfig", node_cert)
        self._kubeconfig("kube-proxy.kubeconfig", ca.issue_client("system:kube-proxy"))
        serving_cert, serving_key = ca.issue_server(self.name, [self.address, self.name]).write(
            self.dir, "kubelet-serving"
        )
        (self.dir / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        (self.dir / "containerd.toml").write_text(self._containerd_config())
        (self.dir / "cni" / "10-corral.conflist").write_text(json.dumps(self._cni_config()))
        kubelet = self._kubelet_config(serving_cert, serving_key)
        (self.dir / "kubelet.yaml").write_text(yaml.safe_dump(kubelet))
        (self.dir / "kube-proxy.yaml").write_text(yaml.safe_dump(self._proxy_config()))

    def _kubeconfig(self, filename: str, pair: pki.KeyPair) -> None:
        config = kubeconfig.build(
            self.name,
            self.plane.server,
            self.plane.ca.cert_pem,
            kubeconfig.Credentials(client_cert=pair.cert, client_key=pair.key),
        )
        pki.write_private(self.dir / filename, kubeconfig.dump(config).encode())

    def _containerd_config(self) -> str:
        d = self.dir / "containerd"
        return containerd_config(
            root=d / "root",
            state=d / "state",
            socket=self.socket,
            opt=d / "opt",
            cni_bin=CNI_PLUGINS,
            cni_conf=self.dir / "cni",
            sandbox_image=BUSYBOX_IMAGE,
        )

    def _cni_config(self) -> dict[str, object]:
        gateway = self.pod_cidr.replace(".0/24", ".1")
        return {
            "cniVersion": "1.0.0",
            "name": "corral",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr, "gateway": gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.dir / "cni-ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def _kubelet_config(self, cert: Path, key: Path) -> dict[str, object]:
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # The host has cgroup v1 and no systemd.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "cgroupsPerQOS": True,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "imageServiceEndpoint": f"unix://{self.socket}",
            "address": self.address,
            "port": KUBELET_PORT,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "tlsCertFile": str(cert),
            "tlsPrivateKeyFile": str(key),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.plane.ca_path)},
            },
            "authorization": {"mode": "Webhook"},
            # The kernel settings it wants are the files of the mount namespace: nothing to write.
            "protectKernelDefaults": False,
            "makeIPTablesUtilChains": False,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
                "imagefs.inodesFree": "1%",
            },
            "mergeDefaultEvictionSettings": False,
            "imageGCHighThresholdPercent": 99,
            "imageGCLowThresholdPercent": 98,
            # Each hosted control plane adds two pods (etcd, control plane) and its backup Jobs.
            "maxPods": 110,
            "failSwapOn": False,
            "staticPodPath": "",
            "resolvConf": str(self.dir / "resolv.conf"),
            "podLogsDir": str(self.dir / "pod-logs"),
            "volumePluginDir": str(self.dir / "volume-plugins"),
            "registerNode": True,
            "nodeStatusUpdateFrequency": "2s",
        }

    def _proxy_config(self) -> dict[str, object]:
        return {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": "iptables",
            "clientConnection": {"kubeconfig": str(self.dir / "kube-proxy.kubeconfig")},
            "hostnameOverride": self.name,
            "bindAddress": self.address,
            "clusterCIDR": str(network.POD_CIDRS),
            "healthzBindAddress": "127.0.0.1:10256",
            "metricsBindAddress": "127.0.0.1:10249",
            # Zero leaves the conntrack table and timeouts as they are: some are host-wide.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {
                "masqueradeAll": True,
                "localhostNodePorts": False,
                "syncPeriod": "30s",
                "minSyncPeriod": "0s",
            },
        }
