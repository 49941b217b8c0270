"""What the tiers that start a control plane share."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def devkube() -> Path:
    # A no-op when the cached binary matches the sources; builds it otherwise.
    subprocess.run([str(ROOT / "tools" / "devkube" / "build.sh")], check=True)
    return ROOT / "tools" / "devkube" / "bin" / "devkube"
