"""Where the CPU goes while hosted control planes start: core-seconds per component between
`start()` and `stop()`, read from every process's utime+stime (/proc/<pid>/stat) sampled twice a
second, and the real nodes' pod cgroups' own count (cpuacct.usage), which also holds what
processes that exited between two samples used.

A process inside a real node's pod cgroups counts for its command name (the control-plane image
links each component under its own name); any other for the environment's process it descends
from (corral's operator and API server, the management
cluster, a real node's kubelet and containerd); anything else is other work on the machine."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import defaultdict
from pathlib import Path

from corral.devenv.environment import Environment

TICKS = os.sysconf("SC_CLK_TCK")
PERIOD = 1.0
CGROUPS = Path("/sys/fs/cgroup/cpuacct")
# The kernel's command name is cut at 15 characters.
HOSTED = {
    "etcd": "etcd",
    "kube-apiserver": "kube-apiserver",
    "kube-controller": "kube-controller-manager",
    "kube-scheduler": "kube-scheduler",
    "kwok": "kwok",
    "corral-kwok": "kwok",
}


def _stat(pid: int) -> tuple[str, int, float] | None:
    """A process's command name, parent and CPU seconds so far; None once it has gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The name is in parentheses and may hold spaces; the fields after it are fixed.
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def _busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (everything but idle and iowait)."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in first[:8]]
    return (sum(values) - values[3] - values[4]) / TICKS


class CpuMeter:
    def __init__(self, env: Environment) -> None:
        self._cgroups = [node.cgroup_root for node in env.real_nodes]
        self._owners = {p.pid: p.name for p in env.processes()}
        self._owners[os.getpid()] = "the bench (its client)"
        self._component: dict[int, str] = {}
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-meter", daemon=True)

    def start(self) -> None:
        self._pods_before = self._pods_usage()
        self._busy_before = _busy_seconds()
        self._began = time.monotonic()
        self._sample(first=True)
        self._thread.start()

    def stop(self) -> str:
        """Stop sampling; the breakdown, one line per component, largest first."""
        self._stop.set()
        self._thread.join()
        self._sample(first=False)
        wall = time.monotonic() - self._began
        busy = _busy_seconds() - self._busy_before
        pods = self._pods_usage() - self._pods_before
        spent: dict[str, float] = defaultdict(float)
        for pid, last in self._last.items():
            spent[self._component[pid]] += last - self._first.get(pid, 0.0)
        sampled_pods = sum(s for c, s in spent.items() if c.startswith("hosted "))
        spent["hosted: exited between samples"] = max(0.0, pods - sampled_pods)
        ours = sum(s for c, s in spent.items() if c != "other work on the machine")
        lines = [
            f"CPU over {wall:.1f} s: machine busy {busy:.1f} core-s of {wall * os.cpu_count():.0f}"
            f"; the environment {ours:.1f} core-s, of which the real node's pods {pods:.1f}"
        ]
        for component, seconds in sorted(spent.items(), key=lambda item: -item[1]):
            if seconds >= 0.05:
                lines.append(f"  {component:<40} {seconds:7.1f} core-s")
        return "\n".join(lines)

    def _run(self) -> None:
        while not self._stop.wait(PERIOD):
            self._sample(first=False)

    def _sample(self, first: bool) -> None:
        pods = self._pods()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            found = _stat(pid)
            if found is None:
                continue
            comm, _, seconds = found
            # A container's process is first seen as the runtime's and then execs its command:
            # its name is read again at every sample.
            if pid not in self._component or pid in pods:
                self._component[pid] = self._classify(pid, comm, pid in pods)
            if first:
                self._first[pid] = seconds
            self._last[pid] = seconds

    def _classify(self, pid: int, comm: str, in_pods: bool) -> str:
        if in_pods:
            return f"hosted {HOSTED.get(comm, comm)}"
        if comm.startswith("containerd-shim"):
            # Shims leave containerd for the machine's init; only the real nodes run them.
            return "real node: container shims"
        seen = pid
        while seen > 1:
            if seen in self._owners:
                return self._owners[seen]
            found = _stat(seen)
            if found is None:
                break
            seen = found[1]
        return "other work on the machine"

    def _pods(self) -> set[int]:
        """The processes in the real nodes' pod cgroups (one hierarchy holds them all)."""
        pids: set[int] = set()
        for cgroup in self._cgroups:
            for procs in (CGROUPS / cgroup.lstrip("/")).rglob("cgroup.procs"):
                with contextlib.suppress(OSError):
                    pids.update(int(p) for p in procs.read_text().split())
        return pids

    def _pods_usage(self) -> float:
        total = 0.0
        for cgroup in self._cgroups:
            with contextlib.suppress(OSError):
                total += int((CGROUPS / cgroup.lstrip("/") / "cpuacct.usage").read_text()) / 1e9
        return total
