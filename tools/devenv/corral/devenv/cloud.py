"""The local cloud: machines (machine.py) kept in a state folder, so that they outlive the
process that made them and any process can find, follow and remove them.

    <state>/cloud.json              its route table and cgroup root, written by open()
    <state>/lock                    taken while a machine is added or removed
    <state>/machines/<name>/        one machine: its record, rootfs, pids, logs

The environment opens the cloud once its bridge and real nodes run (they make the route table)
and removes every machine when it stops. A machine's address comes from the lowest free index.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from corral.devenv import network
from corral.devenv.host import HostChanges, check_host, join_cgroup, make_cgroup_root
from corral.devenv.machine import (
    NAME,
    PATH,
    Machine,
    MachineFailed,
    Pid,
    write_atomically,
)

log = logging.getLogger(__name__)

# How long a machine's boot may run the command it was given (a node installer downloads and
# starts a kubelet), as cloud-init's runcmd, before the machine counts as failed.
USER_DATA_TIMEOUT = 600.0


class CloudRefused(ValueError):
    """The request cannot be met as asked: a bad name, no address left."""


class CloudNotRunning(RuntimeError):
    """The cloud has not been opened (no bridge, no route table)."""


@dataclass(frozen=True)
class Config:
    cgroup: str
    routes: list[network.Route]


class Cloud:
    def __init__(self, state: Path) -> None:
        self.state = state
        self.machines_dir = state / "machines"
        self.config_path = state / "cloud.json"

    def open(self, changes: HostChanges, cgroup_parent: str, routes: list[network.Route]) -> None:
        """Make the cloud usable: its cgroup root below `cgroup_parent` (recorded in
        `changes`) and its route table. The bridge must exist."""
        check_host()
        if not network.bridge_exists():
            raise CloudNotRunning(f"machines need the bridge {network.BRIDGE}")
        cgroup = f"{cgroup_parent.rstrip('/')}/corral-cloud"
        make_cgroup_root(changes, cgroup)
        self.machines_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps({"cgroup": cgroup, "routes": routes}))

    def config(self) -> Config:
        try:
            config = json.loads(self.config_path.read_text())
        except FileNotFoundError:
            raise CloudNotRunning(f"the local cloud in {self.state} is not running") from None
        return Config(config["cgroup"], [(r[0], r[1]) for r in config["routes"]])

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.state.mkdir(parents=True, exist_ok=True)
        with (self.state / "lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    # -- machines ---------------------------------------------------------------------------

    def get(self, name: str) -> Machine | None:
        if not NAME.fullmatch(name):
            return None
        folder = self.machines_dir / name
        return Machine.load(folder) if (folder / "machine.json").exists() else None

    def machines(self) -> list[Machine]:
        if not self.machines_dir.is_dir():
            return []
        return [Machine.load(f.parent) for f in sorted(self.machines_dir.glob("*/machine.json"))]

    def create(self, name: str, hostname: str | None = None) -> Machine:
        """The machine `name`, made if it does not exist; returns once its containerd answers."""
        with self._locked():
            existing = self.get(name)
            if existing is not None:
                return existing
            machine = self._reserve(name, hostname or name, None)
        try:
            machine.boot(self.config().routes)
        except BaseException:
            self.remove(name)
            raise
        return machine

    def request(self, name: str, hostname: str, user_data: str) -> Machine:
        """The machine `name`, made if it does not exist: then it boots in a process of its
        own, which runs `user_data` once the machine is up, and this returns at once."""
        with self._locked():
            existing = self.get(name)
            if existing is not None:
                return existing
            machine = self._reserve(name, hostname, user_data)
            boot_log = (machine.dir / "boot.log").open("ab")
            with boot_log:
                # Its own folder and environment: a driver's working folder (its HOME and
                # TMPDIR) is deleted as soon as the driver has answered.
                boot = subprocess.Popen(
                    [sys.executable, "-m", "corral.devenv.cloud", "boot", str(self.state), name],
                    stdin=subprocess.DEVNULL, stdout=boot_log, stderr=subprocess.STDOUT,
                    cwd=machine.dir, env={"PATH": PATH, "LANG": "C.UTF-8"},
                    start_new_session=True, preexec_fn=lambda: join_cgroup(machine.cgroup),
                )  # fmt: skip
            machine.record_pid("boot", Pid.of(boot.pid))
            return machine

    def _reserve(self, name: str, hostname: str, user_data: str | None) -> Machine:
        for label, value in (("name", name), ("hostname", hostname)):
            if not NAME.fullmatch(value):
                raise CloudRefused(f"the machine's {label} {value[:64]!r} is not a DNS label")
        config = self.config()
        taken = {m.index for m in self.machines()}
        free = [i for i in range(network.MAX_MACHINES) if i not in taken]
        if not free:
            raise CloudRefused(f"no address left: the cloud holds {network.MAX_MACHINES} machines")
        machine = Machine(name, hostname, free[0], f"{config.cgroup}/{name}",
                          self.machines_dir / name)  # fmt: skip
        try:
            machine.prepare(user_data)
        except BaseException:
            machine.remove()
            raise
        return machine

    def remove(self, name: str) -> None:
        """Remove the machine `name`, if there is one."""
        with self._locked():
            machine = self.get(name)
            if machine is not None:
                began = time.monotonic()
                machine.remove()
                log.info("removed machine %s in %.2fs", name, time.monotonic() - began)

    def remove_all(self) -> None:
        """Remove every machine; one that cannot be removed is reported and the rest still go
        (the environment's stop goes on after this)."""
        for machine in self.machines():
            try:
                self.remove(machine.name)
            except (OSError, RuntimeError) as exc:
                log.warning("could not remove machine %s: %s", machine.name, exc)


def boot(state: Path, name: str) -> int:
    """The detached boot of a machine request() recorded: start it, run its user data, and
    write the outcome in `boot.json` for the driver's `state`."""
    cloud = Cloud(state)
    machine = cloud.get(name)
    if machine is None:
        return 1
    outcome: dict[str, object]
    try:
        machine.boot(cloud.config().routes)
        outcome = {"exitCode": machine.run_user_data(USER_DATA_TIMEOUT)}
    except subprocess.TimeoutExpired:
        outcome = {"error": f"its join command did not finish in {USER_DATA_TIMEOUT:.0f}s"}
    except (MachineFailed, CloudNotRunning, RuntimeError, OSError) as exc:
        outcome = {"error": str(exc)[:512]}
    write_atomically(machine.dir / "boot.json", json.dumps(outcome))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    if len(sys.argv) != 4 or sys.argv[1] != "boot":
        sys.exit("usage: python -m corral.devenv.cloud boot <state folder> <machine name>")
    sys.exit(boot(Path(sys.argv[2]), sys.argv[3]))
