"""What the tiers that start a control plane share."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEVKUBE_BIN = ROOT / "tools" / "devkube" / "bin"


def build_devkube(script: Path) -> None:
    """Runs one of devkube's build scripts, a no-op when its cached binary matches the sources.
    Each pytest-xdist worker asks for it: the lock keeps two builds from writing the same file."""
    DEVKUBE_BIN.mkdir(parents=True, exist_ok=True)
    fd = os.open(DEVKUBE_BIN / ".build.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        subprocess.run([str(script)], check=True)
    finally:
        os.close(fd)


@pytest.fixture(scope="session")
def devkube() -> Path:
    build_devkube(ROOT / "tools" / "devkube" / "build.sh")
    return DEVKUBE_BIN / "devkube"


@pytest.fixture(scope="session")
def netbins() -> Path:
    """tools/netbins with its binaries built (a no-op when the cached build matches)."""
    folder = ROOT / "tools" / "netbins"
    subprocess.run([str(folder / "build.sh")], check=True)
    return folder
