"""What a real node or a machine could change on the host, read so that before and after can
be compared."""

from __future__ import annotations

import subprocess
from pathlib import Path

from corral.devenv.host import own_memory_cgroup

# The kernel settings a kubelet, a CNI bridge and kube-proxy are known to rewrite.
SYSCTLS = (
    "kernel/panic_on_oops",
    "kernel/panic",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
)
FIXED_PATHS = (
    "/var/lib/kubelet",
    "/var/lib/cni",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd",
    "/opt/containerd",
    "/var/lib/containerd",
    "/etc/cni",
    "/run/netns",
    "/run/xtables.lock",
    # What a node installer writes on a machine, and what cloud-init keeps there.
    "/opt/cni",
    "/etc/cni",
    "/var/lib/corral-node",
    "/usr/local/bin/corral-node-uninstall.sh",
    "/var/lib/cloud",
    "/var/log/cloud-init-output.log",
    "/root/.ssh/authorized_keys",
)


def snapshot() -> dict[str, object]:
    # Cgroups below this process's own: nodes and machines nest theirs there, and another
    # environment elsewhere on the host has its own.
    return {
        "sysctls": {name: _read(Path("/proc/sys") / name) for name in SYSCTLS},
        "links": _lines(["ip", "-br", "link"], column=0),
        "routes": _lines(["ip", "route"]),
        "iptables": _lines(["iptables-save"], skip_comments=True),
        "mounts": _lines(["cat", "/proc/self/mounts"]),
        "paths": sorted(p for p in FIXED_PATHS if Path(p).exists()),
        "cgroups": sorted(
            str(p)
            for pattern in ("corral-node-*", "corral-cloud")
            for p in Path("/sys/fs/cgroup").glob(_below_own_cgroup(pattern))
        ),
    }


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _lines(argv: list[str], column: int | None = None, skip_comments: bool = False) -> list[str]:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()
    if skip_comments:
        # iptables-save stamps every table with the time it was read.
        out = [line for line in out if not line.startswith("#")]
    if column is not None:
        out = [line.split()[column] for line in out if line.split()]
    return sorted(out)


def _below_own_cgroup(pattern: str) -> str:
    own = own_memory_cgroup().strip("/")
    return "/".join(part for part in ("*", own, "**", pattern) if part)
