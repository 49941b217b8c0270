"""What a container runtime needs on this host, for the real nodes and for the machines alike:
containerd's configuration and the kernel settings a kubelet insists on.

Facts behind each setting: shared/reference/real-node.md.
"""

from __future__ import annotations

import shlex
from pathlib import Path

# What the kubelet insists on (pkg/kubelet/cm setupKernelTunables). Inside a node's or a
# machine's mount namespace each is a regular file bind-mounted over its /proc/sys entry, so the
# kubelet reads the value it wants and the host's setting is never written.
KERNEL_SETTINGS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}


def fake_kernel_settings(folder: Path) -> list[str]:
    """Shell commands, run inside a new mount namespace, that cover each of KERNEL_SETTINGS
    with a file of `folder` holding the wanted value."""
    commands = []
    for name, value in KERNEL_SETTINGS.items():
        file = shlex.quote(str(folder / name.replace("/", "_")))
        commands += [f"echo {value} > {file}", f"mount --bind {file} /proc/sys/{name}"]
    return commands


def containerd_config(
    *,
    root: Path,
    state: Path,
    socket: Path,
    opt: Path,
    cni_bin: Path,
    cni_conf: Path,
    sandbox_image: str,
) -> str:
    """containerd 1.6's configuration with what this host needs: no negative OOM scores (no
    CAP_SYS_RESOURCE here), no AppArmor or SELinux, cgroupfs, pod network namespaces under
    its state folder rather than /run/netns."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
[{cri}]
  sandbox_image = "{sandbox_image}"
  # Negative OOM scores need CAP_SYS_RESOURCE, which a sandboxed host may withhold.
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  netns_mounts_under_state_dir = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
    max_conf_num = 1
"""
