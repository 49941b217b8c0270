"""Start-up time of the local stack (management + one downstream cluster with 3 kwok nodes,
operator and API server), its stop time, and the resident memory of every process."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from corral.devenv.environment import Environment, Options
from tests.bench.common import machine, rss_mib

ROOT = Path(__file__).resolve().parents[2]
RUNS = 3


def main() -> None:
    subprocess.run([str(ROOT / "tools/devkube/build.sh")], check=True)
    devkube = ROOT / "tools/devkube/bin/devkube"
    print(f"machine: {machine()}")
    starts, stops = [], []
    for run in range(RUNS):
        with tempfile.TemporaryDirectory() as tmp:
            env = Environment(Options(Path(tmp), devkube, ROOT / "crds", api_port=0))
            with env:
                starts.append(env.startup_seconds)
                if run == RUNS - 1:
                    # Let the controllers settle before reading memory.
                    time.sleep(10)
                    print(f"{'process':<36} {'RSS MiB':>8}")
                    total = 0.0
                    for process in env.processes():
                        rss = rss_mib(process)
                        total += rss
                        print(f"{process.name:<36} {rss:8.1f}")
                    print(f"{'total':<36} {total:8.1f}")
                began = time.monotonic()
            stops.append(time.monotonic() - began)
    print(
        f"start-up s: {', '.join(f'{s:.1f}' for s in starts)} "
        f"(median {statistics.median(starts):.1f})"
    )
    print(
        f"stop s:     {', '.join(f'{s:.1f}' for s in stops)} "
        f"(median {statistics.median(stops):.1f})"
    )
