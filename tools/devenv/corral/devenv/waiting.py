"""Awaiting conditions instead of sleeping for guessed durations."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from corral.devenv.process import Process

T = TypeVar("T")


class Timeout(RuntimeError):
    """A condition did not come true in time."""


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    watch: Iterable[Process] = (),
    interval: float = 0.1,
) -> T:
    """Call `probe` until it returns something truthy, and return that.

    Exceptions from the probe count as "not yet" (a server not listening, a 404 before a
    create lands), except an AssertionError: a probe asserts what must hold while it waits, so a
    failed assertion is the test's failure and is raised at once rather than after the timeout.
    If a watched process exits meanwhile, its log tail is raised at once too.
    """
    deadline = time.monotonic() + timeout
    watched = list(watch)
    last_error: Exception | None = None
    while True:
        for process in watched:
            process.check()
        try:
            result = probe()
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of a probe means "not ready yet"
            last_error, result = exc, None
        if result:
            return result
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise Timeout(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)
