"""Several API server replicas agree on tokens: what one sees, the others learn through the
cluster, without a write per request."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person


@pytest.fixture(scope="module")
def replica(stack: Environment, api: Api) -> Api:
    return Api(stack.add_apiserver_replica(), api.context, api.token)


def test_a_token_made_on_one_replica_works_on_another(
    api: Api, replica: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    created = person.api.post("/v3/token", {"description": "made on the first replica"}).body
    elsewhere = replica.as_token(created["token"])
    assert wait_for(
        "the other replica's cache", lambda: elsewhere.get("/v3/tokens").status == 200, 10
    )
    assert person.api.delete(f"/v3/tokens/{created['id']}").status == 204
    assert wait_for("the deletion to reach the other replica",
                    lambda: elsewhere.get("/v3/tokens").status == 404, 10)  # fmt: skip


def test_a_session_kept_alive_on_one_replica_is_not_idle_on_another(
    replica: Api, make_user: Callable[..., Person], setting: Callable[[str, str], None]
) -> None:
    person = make_user()
    assert person.api.token is not None
    setting("auth-user-session-idle-ttl-minutes", "0.1")  # 6 s
    began = time.monotonic()
    while time.monotonic() - began < 9:  # only the first replica sees the session used
        assert person.api.get("/v3/tokens").status == 200
        time.sleep(0.5)  # pacing the client, not waiting for a condition
    # 9 s after login the other replica has never served this session itself; it must take
    # the last use from what the first replica wrote down.
    other = replica.as_token(person.api.token).get("/v3/tokens")
    assert other.status == 200, other.body
