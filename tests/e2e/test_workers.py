"""`corral-apiserver --workers 2`: two processes serve one port, each on its own; a worker
that dies is replaced while the other serves; the login throttle counts one user's failures
once across both."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corral.apiserver.auth.throttle import USER_FREE_FAILURES
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person


@pytest.fixture(scope="module")
def served(stack: Environment, api: Api) -> Iterator[tuple[Api, int]]:
    """A replica serving with two workers, and its supervisor's pid."""
    url = stack.add_apiserver_replica(workers=2)
    supervisor = stack.apiserver_replica(url).pid
    wait_for("two workers", lambda: len(workers_of(supervisor)) == 2, 30)
    yield Api(url, api.context, api.token), supervisor
    last, process = workers_of(supervisor), stack.apiserver_replica(url)
    os.kill(supervisor, signal.SIGTERM)  # the supervisor alone: it stops its workers
    stopped = wait_for("the supervisor to exit", lambda: not process.running(), 30)
    gone = [pid for pid in last if not Path(f"/proc/{pid}").exists()]
    stack.remove_apiserver_replica(url)
    assert stopped and gone == last


def workers_of(supervisor: int) -> list[int]:
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    return [int(pid) for pid in children.read_text().split()] if children.exists() else []


def test_each_worker_serves_and_a_dead_one_is_replaced(served: tuple[Api, int]) -> None:
    api, supervisor = served
    first, second = workers_of(supervisor)
    for serving, stopped in ((first, second), (second, first)):
        os.kill(stopped, signal.SIGSTOP)  # it accepts nothing: `serving` alone answers
        try:
            assert wait_for(f"worker {serving} ready", lambda: api.get("/readyz").status == 200, 30)
            assert all(api.get("/v3/users").status == 200 for _ in range(5))
        finally:
            os.kill(stopped, signal.SIGCONT)

    os.kill(first, signal.SIGKILL)
    assert all(api.get("/v3/users").status == 200 for _ in range(5))  # the other one serves
    replaced = wait_for(
        "a new worker", lambda: len(set(workers_of(supervisor)) - {first, second}) == 1, 30
    )
    assert replaced
    (new,) = set(workers_of(supervisor)) - {first, second}
    os.kill(second, signal.SIGSTOP)
    try:
        assert wait_for("the new worker ready", lambda: api.get("/readyz").status == 200, 60)
        assert api.get("/v3/users").status == 200
    finally:
        os.kill(second, signal.SIGCONT)
    assert sorted(workers_of(supervisor)) == sorted([new, second])


def test_the_login_throttle_counts_failures_once_across_workers(
    served: tuple[Api, int], make_user: Callable[..., Person]
) -> None:
    api, supervisor = served
    person = make_user()
    first, second = workers_of(supervisor)
    statuses = []
    # Three wrong passwords checked by one worker, then three by the other: the second
    # checks the two free failures left and refuses the third, it does not give its own five.
    for stopped in (second, first):
        os.kill(stopped, signal.SIGSTOP)
        try:
            statuses += [api.login(person.username, "not-the-password").status for _ in range(3)]
        finally:
            os.kill(stopped, signal.SIGCONT)
    assert statuses == [401] * USER_FREE_FAILURES + [429], statuses
