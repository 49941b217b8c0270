"""`corral-apiserver --workers N`: N processes accepting on one listening socket, so that every
core the pod has serves `/v3`.

The supervisor binds the socket, then forks the workers (before it runs any event loop or
thread), restarts a worker that dies, and on SIGTERM or SIGINT signals each worker by its pid
and waits for all. Each worker is a full replica, as each API server pod is: its own caches
(watches), its own client of the management cluster. What must hold across replicas already
does through the management cluster (the rate-limit ledger, claims, the login state key);
the login throttle, which each pod holds alone, is shared by the workers of a pod through one
SQLite file (`auth.throttle`). What each worker keeps for itself is a cache of something
stored (verified tokens by version, access by binding version), or a token's last activity,
written to the token at most once a minute as each pod's is.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

log = logging.getLogger(__name__)

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
# A worker that dies sooner than this after its start is restarted only after this long, so
# that one that cannot start does not spin the supervisor.
RESTART_DELAY = 1.0


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process may use: those it may run on, bounded by its cgroup's quota."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota = quota_cpus(cpu_max.read_text())
    except OSError:  # no cgroup v2 here
        quota = None
    return max(1, min(cpus, quota)) if quota else cpus


def quota_cpus(cpu_max: str) -> int | None:
    """The CPUs a cgroup's `cpu.max` (`<quota> <period>` or `max <period>`) grants, rounded
    up; None when unlimited or unreadable."""
    fields = cpu_max.split()
    if len(fields) != 2 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    quota, period = int(fields[0]), int(fields[1])
    return math.ceil(quota / period) if period else None


def supervise(count: int, serve: Callable[[int], int]) -> int:
    """Run `count` workers, each `serve(alive)` in a forked process, until SIGTERM or SIGINT;
    then stop them and wait for them. Returns the exit status for the supervisor.

    `alive` is the read end of a pipe whose write end the supervisor alone holds: it reads as
    ended once the supervisor is gone, however it went."""
    alive, held = os.pipe()
    workers: dict[int, float] = {}  # pid: when it started
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(workers):
            _signal(pid, signal.SIGTERM)

    def start() -> None:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.close(held)
            status = 1
            try:
                status = serve(alive)
            except BaseException:
                log.exception("worker %d failed", os.getpid())
            finally:
                logging.shutdown()
                os._exit(status)
        workers[pid] = time.monotonic()
        log.info("worker %d started", pid)
        if stopping:  # the signal came between the fork and the line above
            _signal(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(count):
        start()
    while workers:
        pid, status = os.wait()
        started = workers.pop(pid, None)
        if started is None:
            continue
        if stopping:
            log.info("worker %d stopped", pid)
            continue
        log.warning("worker %d exited (%s); starting another", pid, _describe(status))
        if time.monotonic() - started < RESTART_DELAY:
            time.sleep(RESTART_DELAY)
        if not stopping:
            start()
    os.close(held)
    os.close(alive)
    return 0


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # exited already: os.wait() collects it
        os.kill(pid, sig)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"status {os.waitstatus_to_exitcode(status)}"
