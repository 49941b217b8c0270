"""Child processes of the development environment.

Every child gets its own process group, so stopping it also stops anything it spawned, and a
parent-death signal, so that even a parent killed with SIGKILL leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def _die_with_parent() -> None:
    # Runs in the child between fork and exec.
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class ProcessFailed(RuntimeError):
    """A child exited while it was expected to be running."""


class Process:
    """One long-running child process whose output goes to a log file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as out:
            self._popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        log.info("started %s (pid %d), log %s", name, self.pid, log_path)

    @property
    def pid(self) -> int:
        return self._popen.pid

    def running(self) -> bool:
        return self._popen.poll() is None

    def check(self) -> None:
        """Raise ProcessFailed, with the tail of the log, if the process has exited."""
        code = self._popen.poll()
        if code is not None:
            raise ProcessFailed(f"{self.name} exited with {code}; last log lines:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        stop_all([self], grace)

    def terminate(self) -> None:
        if self.running():
            self._signal_group(signal.SIGTERM)

    def wait_or_kill(self, deadline: float) -> None:
        """Wait for the process until the monotonic `deadline`, then KILL its group."""
        try:
            self._popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in time; killing it", self.name)
            self._signal_group(signal.SIGKILL)
            self._popen.wait()

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)


def stop_all(processes: Iterable[Process], grace: float = 10.0) -> None:
    """TERM all the process groups at once, then KILL whatever is left after `grace` seconds."""
    processes = list(processes)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        process.wait_or_kill(deadline)
