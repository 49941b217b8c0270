"""Several API server replicas agree on tokens: what one sees, the others learn through the
cluster, without a write per request."""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person, set_setting


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
    """A replica that never served a session takes its last use from what the serving one
    wrote down, at most half the idle timeout (and the writer's 1 s tick) ago. At 12 s idle
    that leaves the write and its watch 5 s to arrive; at 6 s it left 2, which a loaded
    management cluster can take."""
    person = make_user()
    assert person.api.token is not None
    setting("auth-user-session-idle-ttl-minutes", "0.2")  # 12 s; a use is written every 6 s
    began = time.monotonic()
    while time.monotonic() - began < 15:  # only the first replica sees the session used
        assert person.api.get("/v3/tokens").status == 200
        time.sleep(0.5)  # pacing the client, not waiting for a condition
    # 15 s after login, past the idle timeout, the other replica has never served this
    # session itself; it must take the last use from what the first replica wrote down.
    other = replica.as_token(person.api.token).get("/v3/tokens")
    assert other.status == 200, other.body


def limit_seen(caller: Api, limit: str) -> bool:
    return caller.get("/v3/tokens").headers.get("X-RateLimit-Limit") == limit


def test_two_replicas_together_give_a_user_the_limit_once(
    api: Api, replica: Api, stack: Environment, make_user: Callable[..., Person],
    management: k8s.ApiClient,
) -> None:  # fmt: skip
    # Every user is made first: once the limit is 10, the admin is held to it too.
    person, observer = make_user(), make_user()
    here, there = person.api, replica.as_token(person.api.token)
    assert wait_for("the other replica's cache", lambda: there.get("/v3/tokens").status == 200, 10)
    set_setting(stack, "api-rate-limit-per-minute", "10")
    try:
        for caller in (observer.api, replica.as_token(observer.api.token)):
            wait_for("the limit on both replicas", lambda c=caller: limit_seen(c, "10"), 10)
        # A minute of the wall clock to itself: windows are the clock's minutes.
        began = int(time.time() // 60)
        wait_for("the next minute", lambda: int(time.time() // 60) > began, 65)
        responses = [(here if i % 2 else there).get("/v3/tokens") for i in range(30)]
        statuses = [r.status for r in responses]
        assert statuses.count(200) == 10, statuses
        assert set(statuses) == {200, 429}
        assert all(r.headers["X-RateLimit-Limit"] == "10" for r in responses)
        assert all(int(r.headers["Retry-After"]) >= 1 for r in responses if r.status == 429)
        record = k8s.CoreV1Api(management).read_namespaced_config_map(
            f"ratelimit-{person.id}", "svc-system"
        )
        assert record.data["used"] == "10"
        assert [(o.kind, o.name) for o in record.metadata.owner_references] == [("User", person.id)]
    finally:
        set_setting(stack, "api-rate-limit-per-minute", "100000")
        for caller in (observer.api, replica.as_token(observer.api.token)):
            wait_for("the limit lifted", lambda c=caller: limit_seen(c, "100000"), 70)
    assert api.delete(f"/v3/users/{person.id}").status == 204
    wait_for("the record to go with its user",
             lambda: not config_map_exists(management, f"ratelimit-{person.id}"), 60)  # fmt: skip


def config_map_exists(management: k8s.ApiClient, name: str) -> bool:
    try:
        k8s.CoreV1Api(management).read_namespaced_config_map(name, "svc-system")
    except k8s.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
