from __future__ import annotations

import os
import signal
from pathlib import Path

from corral.devenv.process import Process, stop_all
from corral.devenv.waiting import wait_for


def test_stop_terminates_the_whole_process_group(tmp_path: Path) -> None:
    # The shell starts a grandchild; stopping the shell must stop it too.
    pid_file = tmp_path / "grandchild.pid"
    process = Process(
        "shell", ["sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], tmp_path / "sh.log"
    )
    grandchild = int(wait_for("grandchild", lambda: pid_file.read_text().strip() or None, 10))
    process.stop(grace=5)

    assert not process.running()
    # The signal reached the grandchild with its group; under load it may take a moment to die.
    wait_for("the grandchild to end", lambda: not _alive(grandchild), 5)


def test_a_process_ignoring_term_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    stubborn = Process(
        "stubborn", ["sh", "-c", f"trap '' TERM; touch {ready}; while :; do sleep 0.1; done"],
        tmp_path / "stubborn.log",
    )  # fmt: skip
    wait_for("trap installed", ready.exists, 10)
    stop_all([stubborn], grace=0.2)
    assert not stubborn.running()
    assert stubborn._popen.returncode == -signal.SIGKILL


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"
