from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from corral.devenv.process import Process, ProcessFailed
from corral.devenv.waiting import Timeout, wait_for


def test_returns_the_first_truthy_result_and_treats_errors_as_not_yet() -> None:
    calls = itertools.count()

    def probe() -> str | None:
        n = next(calls)
        if n == 0:
            raise ConnectionError("not listening yet")
        return "ready" if n >= 2 else None

    assert wait_for("probe", probe, timeout=5, interval=0) == "ready"


def test_times_out_naming_what_it_waited_for_and_the_last_error() -> None:
    def probe() -> None:
        raise ConnectionRefusedError("refused")

    with pytest.raises(Timeout, match=r"waiting for the thing \(last error: refused\)"):
        wait_for("the thing", probe, timeout=0.05, interval=0.01)


def test_a_watched_process_that_exits_fails_at_once_with_its_log(tmp_path: Path) -> None:
    process = Process("crasher", ["sh", "-c", "echo boom; exit 3"], tmp_path / "crasher.log")
    with pytest.raises(ProcessFailed, match=r"(?s)crasher exited with 3.*boom"):
        wait_for("never", lambda: None, timeout=30, watch=[process], interval=0.01)


def test_empty_results_are_not_yet() -> None:
    results = iter([{}, [], "", 0, {"ready": True}])
    assert wait_for("probe", lambda: next(results), timeout=5, interval=0) == {"ready": True}


def test_a_failed_assertion_in_the_probe_fails_at_once() -> None:
    calls = itertools.count()

    def probe() -> None:
        next(calls)
        raise AssertionError("the backup says active, not failed")

    with pytest.raises(AssertionError, match="not failed"):
        wait_for("the thing", probe, timeout=5, interval=0.01)
    assert next(calls) == 1
