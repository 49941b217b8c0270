"""A machine: a Linux machine on this host, as a cloud's VM would be, made of namespaces.

One process holds a machine's mount, network, PID, UTS and cgroup namespaces: `unshare` and
its child, `catatonit`, PID 1 inside, which reaps what is orphaned there. So inside the machine
`ps` sees only its own processes, `hostname` says its own name, and killing PID 1 ends every
process in it. Every process of a machine also runs in a cgroup subtree of its own
(cloud.py's root), which its cgroup namespace shows as `/`: a kubelet or runc inside that uses
absolute cgroup paths stays in it, and removing the machine kills what that subtree holds.

Its `/etc`, `/opt`, `/usr/local`, `/var`, `/root`, `/run` and `/tmp` are bind mounts of its own
folder (`/etc` seeded with what tools need: users, hosts, resolver, CA certificates, the
alternatives), so whatever an installer writes there as root stays inside; the rest of the
root file system (`/usr`, `/bin`) is the host's, read-only inside, as a machine image, and
`/dev/shm` is its own. It runs
Debian's containerd with the configuration, socket and CNI folders a real machine with
containerd installed has, and on request Debian's sshd on its own address.

The kernel settings a kubelet rewrites are files inside its mount namespace (runtime.py), as on
the real nodes, so the host's are never written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from corral.devenv import images, network
from corral.devenv.host import (
    join_cgroup,
    kill_until_gone,
    make_cgroup,
    pids_in_cgroup,
    pids_in_namespace,
    remove_cgroup,
)
from corral.devenv.runtime import containerd_config, fake_kernel_settings
from corral.devenv.waiting import wait_for

log = logging.getLogger(__name__)

START_TIMEOUT = 30.0
EXEC_TIMEOUT = 300.0
SSH_PORT = 22
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
# The pods' sandbox. containerd's default (registry.k8s.io/pause) cannot be pulled here, so the
# local cloud's machines are set up as an air-gapped site's would be: with an image the node
# installer imports from the catalog's archive (nodeassets.py puts busybox there).
SANDBOX_IMAGE = images.BUSYBOX_IMAGE
# `unshare` stays outside the new PID namespace, its child is PID 1 inside; each dies with
# the other.
NEW_NAMESPACES = ["unshare", "--mount", "--net", "--pid", "--uts", "--cgroup", "--fork",
                  "--kill-child", "--mount-proc", "--propagation", "private", "--"]  # fmt: skip
# A DNS label: a machine's name is its folder's name and its default hostname.
NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# The folders a machine has of its own; the rest of the file system is the host's.
OWN = ("etc", "opt", "usr/local", "var", "root", "run", "tmp")
# What tools read from /etc, copied from the host (symbolic links as they are).
ETC_SEED = (
    "passwd", "group", "nsswitch.conf", "resolv.conf", "host.conf", "gai.conf",
    "protocols", "services", "shells", "ssl", "ca-certificates", "ca-certificates.conf",
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "os-release",
    "debian_version", "iproute2", "ssh/moduli",
)  # fmt: skip
SSHD_CONFIG = """\
ListenAddress {address}
Port {port}
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AuthorizedKeysFile .ssh/authorized_keys
PidFile /run/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
"""


class MachineFailed(RuntimeError):
    """A machine could not be started; the message says which step and why."""


class Result(NamedTuple):
    rc: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class Pid:
    """A process, told apart from a later one with the same number by its start time."""

    pid: int
    start: int

    @classmethod
    def of(cls, pid: int) -> Pid:
        fields = _stat(pid)
        if fields is None:
            raise ProcessLookupError(pid)
        return cls(pid, int(fields[19]))

    def alive(self) -> bool:
        fields = _stat(self.pid)
        return fields is not None and fields[0] != "Z" and int(fields[19]) == self.start


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state first)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


@dataclass
class Machine:
    """A machine, as recorded in its folder `dir`: its name, hostname, address (from its index
    on the bridge) and cgroup; its processes are found from the files of `dir/pids`."""

    name: str
    hostname: str
    index: int
    cgroup: str
    dir: Path

    @property
    def address(self) -> str:
        return network.machine_address(self.index)

    @property
    def veth(self) -> str:
        return network.machine_veth(self.index)

    @property
    def rootfs(self) -> Path:
        return self.dir / "rootfs"

    # -- record ----------------------------------------------------------------------------

    @classmethod
    def load(cls, folder: Path) -> Machine:
        record = json.loads((folder / "machine.json").read_text())
        return cls(record["name"], record["hostname"], record["index"], record["cgroup"], folder)

    def pid(self, role: str) -> Pid | None:
        """The recorded process `role` (`boot`, `holder`, `init`), if recorded."""
        try:
            pid, start = (self.dir / "pids" / role).read_text().split()
        except (OSError, ValueError):
            return None
        return Pid(int(pid), int(start))

    def record_pid(self, role: str, pid: Pid) -> None:
        write_atomically(self.dir / "pids" / role, f"{pid.pid} {pid.start}\n")

    def running(self) -> bool:
        init = self.pid("init")
        return init is not None and init.alive()

    # -- making it --------------------------------------------------------------------------

    def prepare(self, user_data: str | None = None) -> None:
        """Write its record and its own folders, the cgroup, and the command it runs when it
        boots (`user_data`, as cloud-init's runcmd): nothing runs yet."""
        for folder in (self.dir, self.dir / "pids", self.dir / "kernel"):
            folder.mkdir(parents=True, exist_ok=True)
        record = {"name": self.name, "hostname": self.hostname, "index": self.index,
                  "cgroup": self.cgroup}  # fmt: skip
        write_atomically(self.dir / "machine.json", json.dumps(record))
        self._seed_rootfs()
        if user_data is not None:
            scripts = self.rootfs / "var/lib/cloud/instance/scripts"
            scripts.mkdir(parents=True, mode=0o700)
            # The join command holds a secret: root may read it, inside the machine only.
            (scripts / "runcmd").touch(mode=0o700)
            (scripts / "runcmd").write_text(f"#!/bin/sh\n{user_data}\n")
        make_cgroup(self.cgroup)

    def boot(self, routes: list[network.Route]) -> None:
        """Start the machine: its namespaces, its link to the bridge with `routes`, and
        containerd; returns once containerd answers."""
        self._start_namespaces()
        network.link_namespace(self.veth, self._init().pid, self.address, routes)
        self.spawn(["containerd"], "/var/log/containerd.log")
        wait_for(
            f"{self.name}: containerd",
            lambda: self.exec(["ctr", "version"], timeout=5).rc == 0,
            START_TIMEOUT,
        )

    def run_user_data(self, timeout: float) -> int:
        """Run the command given at prepare() as root, its output in
        /var/log/cloud-init-output.log, as cloud-init would; its exit status."""
        script = "/var/lib/cloud/instance/scripts/runcmd"
        argv = ["sh", "-c", f"sh {script} >/var/log/cloud-init-output.log 2>&1"]
        return self.exec(argv, timeout=timeout).rc

    def _start_namespaces(self) -> None:
        argv = [*NEW_NAMESPACES, "sh", "-c", self._holder_script()]
        holder_log = (self.dir / "holder.log").open("ab")
        with holder_log:
            holder = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=holder_log,
                # Its own session, outside the caller's: the machine outlives whoever made it.
                start_new_session=True,
                # In the machine's cgroup before the cgroup namespace is made, so that the
                # namespace's root is the machine's cgroup.
                preexec_fn=lambda: join_cgroup(self.cgroup),
            )  # fmt: skip
        self.record_pid("holder", Pid.of(holder.pid))
        assert holder.stdout is not None
        with holder.stdout:
            ready = _read_line(holder.stdout.fileno(), START_TIMEOUT)
        if ready != b"ready":
            tail = (self.dir / "holder.log").read_text(errors="replace")[-2000:]
            raise MachineFailed(f"{self.name}: its namespaces did not start: {tail}")
        children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()
        self.record_pid("init", Pid.of(int(children[0])))

    def _holder_script(self) -> str:
        """The shell that makes the machine inside its new namespaces, then becomes its PID 1."""
        q = shlex.quote
        commands = ["set -eu", *fake_kernel_settings(self.dir / "kernel")]
        commands.append(f"hostname {q(self.hostname)}")
        # The cgroup hierarchies as the machine's cgroup namespace shows them: its own
        # subtree is their root.
        commands.append("mount -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup")
        for kind, target, options in _cgroup_mounts():
            commands += [
                f"mkdir -p {q(target)}",
                f"mount -t {kind} -o {options} cgroup {q(target)}",
            ]
        # The host's file system is the machine's image: read-only inside, so what is written
        # outside its own folders fails there rather than changing the host.
        commands.append("mount -o remount,bind,ro /")
        commands.append("mount -t tmpfs -o mode=1777,nosuid,nodev shm /dev/shm")
        # A folder whose own folder would be covered is bound last, while its source is
        # still reachable. A bind of a read-only mount is read-only until remounted.
        own = sorted(OWN, key=lambda d: self.dir.is_relative_to(Path("/", d)))
        for folder in own:
            commands.append(f"mount --bind {q(str(self.rootfs / folder))} /{folder}")
            commands.append(f"mount -o remount,bind,rw /{folder}")
        commands += ["ip link set lo up", "echo ready", "exec catatonit -P >/dev/null"]
        return "\n".join(commands)

    def _init(self) -> Pid:
        init = self.pid("init")
        if init is None or not init.alive():
            raise MachineFailed(f"machine {self.name} is not running")
        return init

    def _seed_rootfs(self) -> None:
        for folder in OWN:
            (self.rootfs / folder).mkdir(parents=True, exist_ok=True)
        (self.rootfs / "root").chmod(0o700)
        for sticky in ("tmp", "var/tmp"):
            (self.rootfs / sticky).mkdir(exist_ok=True)
            (self.rootfs / sticky).chmod(0o1777)
        for folder in ("usr/local/bin", "usr/local/sbin", "usr/local/lib", "usr/local/share",
                       "var/lib", "var/log", "var/cache", "run/lock", "run/sshd",
                       "opt/cni/bin", "etc/cni/net.d", "etc/containerd", "etc/ssh"):  # fmt: skip
            (self.rootfs / folder).mkdir(parents=True, exist_ok=True)
        (self.rootfs / "var/run").symlink_to("/run")
        (self.rootfs / "var/lock").symlink_to("/run/lock")
        etc = self.rootfs / "etc"
        for name in ETC_SEED:
            source = Path("/etc") / name
            if source.is_dir() and not source.is_symlink():
                # /etc/ssl/private: the host's private keys stay on the host.
                shutil.copytree(source, etc / name, symlinks=True,
                                ignore=shutil.ignore_patterns("private"))  # fmt: skip
            elif source.exists() or source.is_symlink():
                shutil.copy2(source, etc / name, follow_symlinks=False)
        # The host's password hashes stay on the host: every account is locked for passwords.
        users = [line.split(":", 1)[0] for line in (etc / "passwd").read_text().splitlines()]
        shadow = "".join(f"{user}:*:20000:0:99999:7:::\n" for user in users if user)
        (etc / "shadow").touch(mode=0o640)
        (etc / "shadow").write_text(shadow)
        (etc / "hostname").write_text(f"{self.hostname}\n")
        (etc / "hosts").write_text(
            f"127.0.0.1\tlocalhost\n::1\tlocalhost\n{self.address}\t{self.hostname}\n"
        )
        (etc / "containerd" / "config.toml").write_text(
            containerd_config(
                root=Path("/var/lib/containerd"),
                state=Path("/run/containerd"),
                socket=Path(CONTAINERD_SOCKET),
                opt=Path("/opt/containerd"),
                cni_bin=Path("/opt/cni/bin"),
                cni_conf=Path("/etc/cni/net.d"),
                sandbox_image=SANDBOX_IMAGE,
            )
        )

    # -- using it ---------------------------------------------------------------------------

    def exec(self, argv: list[str], stdin: bytes = b"", timeout: float = EXEC_TIMEOUT) -> Result:
        """Run `argv` as root inside every namespace and the cgroup of the machine, in `/`."""
        enter = ["nsenter", "-t", str(self._init().pid), "-m", "-n", "-p", "-u", "-C", "--wd=/"]
        # Files, not pipes: a daemon that a command leaves running keeps its output open.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            done = subprocess.run(
                [*enter, "--", *argv], input=stdin, stdout=out, stderr=err, timeout=timeout,
                env={"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "USER": "root",
                     "LOGNAME": "root"},
                preexec_fn=lambda: join_cgroup(self.cgroup), check=False,
            )  # fmt: skip
            out.seek(0)
            err.seek(0)
            return Result(done.returncode, out.read(), err.read())

    def spawn(self, argv: list[str], log_path: str) -> None:
        """Start a daemon inside the machine, in a session of its own, its output appended to
        `log_path` (a path inside the machine); the machine's PID 1 is then its parent."""
        script = 'exec "$@" >>"$0" 2>&1 </dev/null'
        done = self.exec(["setsid", "-f", "sh", "-c", script, log_path, *argv])
        if done.rc != 0:
            raise MachineFailed(f"{self.name}: cannot start {argv[0]}: {done.stderr.decode()}")

    def start_sshd(self, authorized_key: str) -> str:
        """Run sshd on the machine's address, letting root in with `authorized_key` alone (one
        line of authorized_keys); the SHA256 fingerprint of its own new host key."""
        if "\n" in authorized_key.strip() or not authorized_key.strip():
            raise ValueError("authorized_key must be one public key, on one line")
        ssh = self.rootfs / "root" / ".ssh"
        ssh.mkdir(mode=0o700, exist_ok=True)
        (ssh / "authorized_keys").write_text(authorized_key.strip() + "\n")
        (ssh / "authorized_keys").chmod(0o600)
        config = SSHD_CONFIG.format(address=self.address, port=SSH_PORT)
        (self.rootfs / "etc" / "ssh" / "sshd_config").write_text(config)
        key = "/etc/ssh/ssh_host_ed25519_key"
        for argv in (["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key],
                     ["/usr/sbin/sshd"]):  # fmt: skip
            done = self.exec(argv, timeout=30)
            if done.rc != 0:
                raise MachineFailed(f"{self.name}: {argv[0]} failed: {done.stderr.decode()}")
        wait_for(f"{self.name}: sshd", lambda: _accepts(self.address, SSH_PORT), START_TIMEOUT)
        listed = self.exec(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{key}.pub"])
        return listed.stdout.decode().split()[1]

    # -- removing it ------------------------------------------------------------------------

    def remove(self) -> None:
        """Kill every process of the machine, then delete its link, cgroups and files."""
        init = self.pid("init")

        def remains() -> set[int]:
            inside = pids_in_namespace(init.pid, "pid") if init and init.alive() else set()
            return pids_in_cgroup(self.cgroup) | inside

        # Its boot first (it would go on making the machine), then everything inside.
        for role in ("boot", "init", "holder"):
            pid = self.pid(role)
            if pid is not None and pid.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid.pid, signal.SIGKILL)
        kill_until_gone(self.name, remains)
        for role in ("boot", "holder"):
            _reap(self.pid(role))
        network.delete_link(self.veth)
        remove_cgroup(self.cgroup)
        shutil.rmtree(self.dir, ignore_errors=not self.dir.exists())


def _cgroup_mounts() -> list[tuple[str, str, str]]:
    """(type, mount point, options) of every cgroup hierarchy mounted on this host."""
    mounts = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _source, target, kind, options, *_ = line.split()
        if kind in ("cgroup", "cgroup2") and target.startswith("/sys/fs/cgroup/"):
            mounts.append((kind, target, options))
    return mounts


def _read_line(fd: int, timeout: float) -> bytes:
    """The first line written to `fd`, waiting `timeout` seconds at most (b"" if none)."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 256)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def _reap(pid: Pid | None) -> None:
    # The holder and the boot process are children of whoever made the machine, when that
    # is still this process: collect them, or they stay as zombies.
    if pid is not None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid.pid, os.WNOHANG)


def _accepts(address: str, port: int) -> bool:
    with socket.create_connection((address, port), timeout=1):
        return True


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.rename(path)
