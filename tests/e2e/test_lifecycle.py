"""`make run` stays in the foreground, writes dev.env, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from corral.devenv.waiting import wait_for

from ..conftest import ROOT


def descendants(pid: int) -> set[int]:
    """All live processes below `pid`, by walking /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_stops_every_process_it_started(tmp_path: Path, devkube: Path) -> None:
    state = tmp_path / "state"
    cli = subprocess.Popen(
        [sys.executable, "-m", "corral.devenv", "run", "--dir", str(state),
         "--devkube", str(devkube), "--crds", str(ROOT / "crds"), "--api-port", "0",
         "--nodes", "1", "--real-nodes", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        env_file = wait_for("dev.env", lambda: (state / "dev.env").exists(), timeout=180)
        assert env_file
        settings = dict(line.split("=", 1) for line in (state / "dev.env").read_text().splitlines())
        assert {"CORRAL_URL", "CORRAL_CA", "KUBECONFIG", "CORRAL_DOWNSTREAM_KUBECONFIGS"} <= set(
            settings
        )
        started = descendants(cli.pid)
        # etcd, 2 x (apiserver, controller-manager, scheduler), kwok, operator, apiserver
        assert len(started) >= 10, started
        assert cli.poll() is None, "make run must stay in the foreground"

        os.kill(cli.pid, signal.SIGINT)
        assert cli.wait(timeout=60) == 0
    finally:
        if cli.poll() is None:
            # A failure above: stop it as a user would, so that its own teardown stops what
            # it started (a SIGKILL alone would leave them running).
            os.kill(cli.pid, signal.SIGINT)
            try:
                cli.wait(timeout=60)
            except subprocess.TimeoutExpired:
                cli.kill()
        output = cli.stdout.read() if cli.stdout else ""
    assert [pid for pid in started if alive(pid)] == [], output
    assert not (state / "dev.env").exists()
