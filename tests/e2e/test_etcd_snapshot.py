"""devkube's etcdctl and etcdutl save, inspect and restore a real etcd's snapshot.

They are the tools of issue 14's backup and restore of a hosted control plane: the restore into
fresh data with revisions bumped and marked compacted is what ends every client's watch, so
that informers relist instead of missing the rollback.
"""

from __future__ import annotations

import base64
import json
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.devenv.controlplane import free_port
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

# The etcd recovery guide's value: far above any revision a client can have seen.
REVISION_BUMP = 1_000_000_000
MEMBER = "snapshot-test"


@dataclass
class Member:
    process: Process
    endpoint: str


def start_member(devkube: Path, data_dir: Path, peer: str, log: Path) -> Member:
    endpoint = f"http://127.0.0.1:{free_port()}"
    process = Process(
        "etcd",
        [
            str(devkube),
            "etcd",
            f"--name={MEMBER}",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={endpoint}",
            f"--advertise-client-urls={endpoint}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={MEMBER}={peer}",
            "--log-level=warn",
        ],
        log,
    )

    def healthy() -> bool:
        with urllib.request.urlopen(f"{endpoint}/health", timeout=2) as response:
            return b'"health":"true"' in response.read()

    try:
        wait_for("etcd health", healthy, timeout=30, watch=[process])
    except BaseException:
        process.stop()
        raise
    return Member(process, endpoint)


def run(devkube: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(devkube), *args], capture_output=True, text=True, timeout=60, check=False
    )


def etcdctl(devkube: Path, member: Member, *args: str) -> str:
    result = run(devkube, "etcdctl", f"--endpoints={member.endpoint}", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def get(devkube: Path, member: Member, prefix: str) -> tuple[int, dict[str, str]]:
    """The member's current revision and the keys under `prefix` with their values."""
    reply = json.loads(etcdctl(devkube, member, "get", "--prefix", prefix, "-w", "json"))
    keys = {
        base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode()
        for kv in reply.get("kvs", [])
    }
    return int(reply["header"]["revision"]), keys


@pytest.fixture
def members() -> Iterator[list[Member]]:
    """Every member a test starts, stopped by PID at its end even when it fails."""
    started: list[Member] = []
    yield started
    for member in started:
        member.process.stop()


def test_a_snapshot_restored_with_bumped_revisions_holds_only_what_was_saved(
    devkube: Path, tmp_path: Path, members: list[Member]
) -> None:
    peer = f"http://127.0.0.1:{free_port()}"
    old = start_member(devkube, tmp_path / "data-0", peer, tmp_path / "etcd-0.log")
    members.append(old)
    for i in range(3):
        etcdctl(devkube, old, "put", f"/saved/{i}", f"value-{i}")
    snapshot = tmp_path / "backup.db"
    etcdctl(devkube, old, "snapshot", "save", str(snapshot))
    for i in range(3):
        etcdctl(devkube, old, "put", f"/later/{i}", f"value-{i}")
    etcdctl(devkube, old, "put", "/saved/0", "changed after the snapshot")
    last_seen, _ = get(devkube, old, "/")
    old.process.stop()

    status = run(devkube, "etcdutl", "snapshot", "status", str(snapshot), "-w", "json")
    assert status.returncode == 0, status.stderr
    saved = json.loads(status.stdout)
    assert saved["totalKey"] >= 3
    assert saved["revision"] < last_seen
    assert saved["version"].startswith("3.6")

    restored_dir = tmp_path / "data-1"
    restore = run(
        devkube,
        "etcdutl",
        "snapshot",
        "restore",
        str(snapshot),
        f"--data-dir={restored_dir}",
        f"--name={MEMBER}",
        f"--initial-cluster={MEMBER}={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--bump-revision={REVISION_BUMP}",
        "--mark-compacted",
    )
    assert restore.returncode == 0, restore.stderr

    new = start_member(devkube, restored_dir, peer, tmp_path / "etcd-1.log")
    members.append(new)
    revision, saved_keys = get(devkube, new, "/saved/")
    assert saved_keys == {f"/saved/{i}": f"value-{i}" for i in range(3)}
    assert get(devkube, new, "/later/")[1] == {}
    assert revision == saved["revision"] + REVISION_BUMP
    assert revision > last_seen
    # Marked compacted: reading (or watching) from any revision before the restore fails, so a
    # client that saw the lost writes must start over.
    stale = run(
        devkube, "etcdctl", f"--endpoints={new.endpoint}", "get", "/saved/0", f"--rev={last_seen}"
    )
    assert stale.returncode != 0
    assert "compacted" in stale.stderr
    etcdctl(devkube, new, "put", "/after-restore", "x")
    assert get(devkube, new, "/after-restore")[0] == revision + 1


def test_only_the_etcd_tools_take_command_prefixes(devkube: Path) -> None:
    # Linking etcdctl turns on cobra's prefix matching for the whole process; kubectl must not
    # inherit it, and etcdctl keeps its own binary's behaviour.
    etcdctl_version = run(devkube, "etcdctl", "versio")
    assert etcdctl_version.returncode == 0, etcdctl_version.stderr
    assert "etcdctl version: 3.6.8" in etcdctl_version.stdout
    kubectl_version = run(devkube, "kubectl", "versio", "--client")
    assert kubectl_version.returncode != 0
    assert "unknown command" in kubectl_version.stderr
