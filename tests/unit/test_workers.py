"""What `--workers` defaults to, and the login throttle's counts shared by two workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.apiserver import main
from corral.apiserver.auth.throttle import USER_FREE_FAILURES, LoginThrottle
from corral.apiserver.workers import available_cpus, quota_cpus


@pytest.mark.parametrize(
    ("cpu_max", "cpus"),
    [("max 100000", None), ("200000 100000", 2), ("150000 100000", 2), ("50000 100000", 1),
     ("", None), ("garbage", None), ("100 0", None)],
)  # fmt: skip
def test_a_cgroup_quota_is_rounded_up_to_whole_cpus(cpu_max: str, cpus: int | None) -> None:
    assert quota_cpus(cpu_max) == cpus


def test_the_default_is_the_affinity_bounded_by_the_quota(tmp_path: Path) -> None:
    allowed = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert available_cpus(cpu_max) == allowed
    cpu_max.write_text(f"{(allowed + 3) * 100000} 100000\n")
    assert available_cpus(cpu_max) == allowed
    cpu_max.write_text("10000 100000\n")
    assert available_cpus(cpu_max) == 1
    assert available_cpus(tmp_path / "absent") == allowed


@pytest.mark.parametrize("value", ["-1", "257", "two"])
def test_a_worker_count_out_of_bounds_is_refused(value: str) -> None:
    with pytest.raises(SystemExit):
        main.arguments(["--workers", value])


def test_two_throttles_on_one_file_count_one_users_failures_once(tmp_path: Path) -> None:
    first, second = LoginThrottle(tmp_path / "t.db"), LoginThrottle(tmp_path / "t.db")
    try:
        for n in range(USER_FREE_FAILURES):
            assert (first if n % 2 else second).reserve("bob", f"10.0.0.{n}", 0.0) == 0
        assert first.reserve("bob", "10.0.0.99", 0.0) > 0
        assert second.reserve("bob", "10.0.0.99", 0.0) > 0
        second.succeeded("bob")
        assert first.retry_after("bob", "10.0.0.99", 0.0) == 0
    finally:
        first.close()
        second.close()


def test_old_failures_are_pruned_from_the_shared_file(tmp_path: Path) -> None:
    throttle = LoginThrottle(tmp_path / "t.db")
    try:
        throttle.reserve("bob", "10.0.0.1", 0.0)
        assert len(throttle) == 2
        throttle.prune(10_000.0)
        assert len(throttle) == 0
    finally:
        throttle.close()
