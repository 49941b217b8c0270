"""What a real node needs from this host, and undoing every change made for it.

A real node runs containerd, the kubelet and kube-proxy in namespaces of their own (see
realnode.py), but a few things can only live on the host: cgroup directories, the empty folders
its bind mounts cover, the bridge that links nodes to the control planes. Each is recorded
when made and removed in reverse order, so the host ends as it began.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

# The commands a real node runs, and the Debian package of each (`make node-deps` installs them).
COMMANDS = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    # Copied into the NetworkPolicy enforcer's image (images.py), which runs it on machines.
    "ipset": "ipset",
    "umoci": "umoci",
    "busybox": "busybox-static",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "ip": "iproute2",
    # Machines (machine.py): their PID 1, and sshd on their own address.
    "catatonit": "catatonit",
    "sshd": "openssh-server",
    "ssh-keygen": "openssh-client",
}
CNI_PLUGINS = Path("/usr/lib/cni")


class HostNotReady(RuntimeError):
    """This host cannot run a real node; the message says what is missing."""


def check_host() -> None:
    """Raise HostNotReady naming everything a real node lacks here."""
    if not sys.platform.startswith("linux"):
        raise HostNotReady("real nodes need Linux (namespaces, cgroups, containerd)")
    if os.geteuid() != 0:
        raise HostNotReady("real nodes need root: containerd and the kubelet manage mounts")
    # sshd lives in /usr/sbin, which a driver's PATH may lack.
    path = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
    missing = {pkg for cmd, pkg in COMMANDS.items() if shutil.which(cmd, path=path) is None}
    if not (CNI_PLUGINS / "bridge").exists():
        missing.add("containernetworking-plugins")
    if missing:
        packages = " ".join(sorted(missing))
        raise HostNotReady(f"real nodes need the Debian packages {packages} (`make node-deps`)")


def run(argv: Sequence[str]) -> str:
    """Run a short host command; its stderr goes into the error when it fails."""
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


class HostChanges:
    """Directories made on the host for the nodes, removed newest first by undo(), and
    folders that the environment's processes fill, emptied of what they added."""

    def __init__(self) -> None:
        # (directory, whether what appears below it is ours too)
        self._dirs: list[tuple[Path, bool]] = []
        self._filled: list[tuple[Path, bool, frozenset[Path]]] = []

    def mkdir(self, path: Path) -> None:
        """Create `path` and any missing parents, remembering each one created. What appears
        below `path` is taken to be the environment's (a kubelet's cgroups below a node's);
        below a parent, it may be another environment's, so a parent is removed only empty."""
        missing: list[Path] = []
        for candidate in [path, *path.parents]:
            if candidate.exists():
                break
            missing.append(candidate)
        for directory in reversed(missing):
            directory.mkdir()
            self._dirs.append((directory, directory == path))

    def filled_by_us(self, path: Path) -> None:
        """`path` is a folder that something the environment runs will fill (kube-controller-
        manager's hostPath provisioner): undo() removes every entry that appears in it from
        now on, and the folder itself unless it existed already."""
        existed = path.is_dir()
        entries = frozenset(path.iterdir()) if existed else frozenset()
        self._filled.append((path, existed, entries))

    def undo(self) -> None:
        for path, existed, entries in reversed(self._filled):
            _remove_new_entries(path, existed, entries)
        self._filled.clear()
        for directory, tree in reversed(self._dirs):
            if tree:
                remove_empty_tree(directory)
            else:
                _remove_empty_dir(directory)
        self._dirs.clear()


def _remove_new_entries(path: Path, existed: bool, entries: frozenset[Path]) -> None:
    try:
        if not path.is_dir():
            return
        if not existed:
            shutil.rmtree(path)
            return
        for entry in set(path.iterdir()) - entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    except OSError as exc:
        # The rest of the environment's teardown must still run.
        log.warning("could not empty %s: %s", path, exc)


def remove_empty_tree(directory: Path) -> None:
    """Remove `directory` and the empty folders below it, deepest first."""
    # cgroup directories cannot be removed with their (virtual) files, only with rmdir,
    # deepest first; a folder that still holds a real file is left and reported.
    if not directory.exists():
        return
    for root, dirs, _files in os.walk(directory, topdown=False):
        for name in dirs:
            _remove_empty_dir(Path(root, name))
    _remove_empty_dir(directory)


def _remove_empty_dir(directory: Path) -> None:
    # A cgroup still busy, or a folder another environment still uses, is left and reported:
    # the rest of the teardown must run.
    try:
        directory.rmdir()
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("could not remove %s: %s", directory, exc)


def own_memory_cgroup() -> str:
    """The memory cgroup this process runs in: nodes nest their pods below it, so their
    memory counts against (and is limited with) whatever runs the environment."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    return "/"


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy; the kubelet wants its cgroup root in each."""
    root = Path("/sys/fs/cgroup")
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())


def make_cgroup_root(changes: HostChanges, relative: str) -> None:
    """Create `relative` (an absolute cgroup path) in every hierarchy, recorded in `changes`."""
    for hierarchy in cgroup_hierarchies():
        path = hierarchy / relative.lstrip("/")
        before = [p for p in [path, *path.parents] if not p.exists()]
        changes.mkdir(path)
        _inherit_cpuset(hierarchy, before)


def make_cgroup(relative: str) -> None:
    """Create the cgroup `relative` in every hierarchy, whose parent exists in each already
    (a cgroup root made by make_cgroup_root); remove_cgroup() removes it."""
    for hierarchy in cgroup_hierarchies():
        path = hierarchy / relative.lstrip("/")
        path.mkdir(exist_ok=True)
        _inherit_cpuset(hierarchy, [path])


def _inherit_cpuset(hierarchy: Path, created: list[Path]) -> None:
    if hierarchy.name != "cpuset":
        return
    # A new cpuset is empty and refuses tasks until it inherits cpus and mems.
    for path in reversed(created):
        for key in ("cpuset.cpus", "cpuset.mems"):
            (path / key).write_text((path.parent / key).read_text())


def remove_cgroup(relative: str) -> None:
    """Remove the cgroup `relative` and every cgroup below it, in every hierarchy; a cgroup
    that still holds a process stays and is reported."""
    for hierarchy in cgroup_hierarchies():
        remove_empty_tree(hierarchy / relative.lstrip("/"))


def join_cgroup(relative: str) -> None:
    """Move the calling process into the cgroup `relative` of every hierarchy (its children
    follow it there); safe between fork and exec."""
    pid = str(os.getpid())
    for hierarchy in cgroup_hierarchies():
        (hierarchy / relative.lstrip("/") / "cgroup.procs").write_text(pid)


def pids_in_cgroup(relative: str) -> set[int]:
    """Every process in the cgroup `relative` or below it, in any hierarchy."""
    pids: set[int] = set()
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / relative.lstrip("/")
        if top.exists():
            for procs in top.rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
    return pids


def pids_in_namespace(holder: int, kind: str) -> set[int]:
    """Every other process in the `kind` namespace (`mnt`, `pid`, ...) of process `holder`."""
    try:
        namespace = Path(f"/proc/{holder}/ns/{kind}").readlink()
    except OSError:
        return set()
    pids: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == holder:
            continue
        try:
            if (entry / "ns" / kind).readlink() == namespace:
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


def kill_until_gone(what: str, find: Callable[[], set[int]]) -> None:
    """KILL the processes `find` names until it names none (5 s at most): processes that
    nothing waits for (container shims, a machine's daemons) are found, not remembered."""
    pids: set[int] = set()
    for _ in range(50):
        pids = find()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    log.warning("%s: processes left: %s", what, sorted(pids))
