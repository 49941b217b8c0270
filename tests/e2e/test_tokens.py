"""Tokens through HTTPS as a client uses them: login, the token endpoints, every outcome of the
spec's error tables, TTLs, expiry, logout, hash formats, isolation, CSRF, limits."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from corral.core.auth import hashing
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person, room_in_the_minute, set_setting

GROUP, VERSION = "management.svc.io", "v3"


def token_cr(crs: k8s.CustomObjectsApi, name: str) -> dict | None:
    try:
        return crs.get_cluster_custom_object(GROUP, VERSION, "tokens", name)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def expires_at(crs: k8s.CustomObjectsApi, name: str) -> str | None:
    return ((token_cr(crs, name) or {}).get("status") or {}).get("expiresAt")


def token_names(crs: k8s.CustomObjectsApi) -> set[str]:
    items = crs.list_cluster_custom_object(GROUP, VERSION, "tokens")["items"]
    return {t["metadata"]["name"] for t in items}


# -- login --------------------------------------------------------------------------------


def test_login_returns_a_session_token_once(
    api: Api, stack: Environment, crs: k8s.CustomObjectsApi
) -> None:
    response = api.login("admin", stack.admin_password, description="laptop")
    assert response.status == 201
    assert set(response.body) >= {"token", "id", "expiresAt", "type"}
    name, key = response.body["token"].split(":")
    assert response.body["id"] == name
    stored = token_cr(crs, name)
    assert stored is not None
    assert stored["metadata"]["labels"]["authn.management.svc.io/kind"] == "session"
    assert stored["metadata"]["labels"]["authn.management.svc.io/token-userId"] == "u-admin"
    assert stored["metadata"]["annotations"]["authn.management.svc.io/token-hashed"] == "true"
    assert stored["spec"]["token"].startswith("$3:") and key not in stored["spec"]["token"]
    assert stored["spec"]["isDerived"] is False
    # Session default: 16 h.
    assert stored["spec"]["ttlMillis"] == 16 * 3600 * 1000

    session = api.as_token(response.body["token"])
    listed = session.get("/v3/tokens").body["data"]
    assert [t["current"] for t in listed if t["id"] == name] == [True]
    assert all("token" not in t for t in listed)  # the key is never shown again


def test_cookie_login_sets_an_http_only_secure_session_cookie(api: Api, stack: Environment) -> None:
    response = api.login("admin", stack.admin_password, responseType="cookie")
    assert response.status == 200
    session = response.cookies["R_SESS"]
    assert session["httponly"] and session["secure"]
    assert ":" in session.value
    assert len(response.cookies["CSRF"].value) == 32
    # The cookie alone authenticates.
    me = api.as_token(None).get("/v3/tokens", headers={"Cookie": f"R_SESS={session.value}"})
    assert me.status == 200


@pytest.mark.parametrize(
    ("username", "password"), [("admin", "wrong-password-1"), ("nobody-here", "whatever-1234")]
)
def test_wrong_username_or_password_is_one_generic_401(
    api: Api, username: str, password: str
) -> None:
    response = api.login(username, password)
    assert response.status == 401
    assert response.body == {
        "type": "error", "baseType": "error", "status": 401,
        "code": "Unauthorized", "message": "authentication failed",
    }  # fmt: skip


def test_repeated_login_failures_are_throttled(api: Api, make_user: Callable[..., Person]) -> None:
    person = make_user()
    statuses = [api.login(person.username, "not-the-password").status for _ in range(6)]
    assert statuses == [401] * 5 + [429]
    throttled = api.login(person.username, person.password)  # even the right password waits
    assert throttled.status == 429
    assert int(throttled.headers["Retry-After"]) >= 1


# -- the token endpoints ------------------------------------------------------------------


def test_create_get_list_delete_a_derived_token(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    created = person.api.post("/v3/token", {"description": "ci", "ttlMillis": 3_600_000})
    assert created.status == 201
    body = created.body
    assert body["isDerived"] is True and body["ttl"] == 3_600_000
    assert body["token"].startswith(body["id"] + ":")
    assert body["expiresAt"].endswith("Z") and body["expired"] is False
    assert body["userId"] == person.id and body["description"] == "ci"
    assert body["links"]["self"].endswith(f"/v3/tokens/{body['id']}")

    derived = person.api.as_token(body["token"])
    got = derived.get(f"/v3/token/{body['id']}")
    assert got.status == 200 and got.body["current"] is True and "token" not in got.body
    assert {t["id"] for t in person.api.get("/v3/tokens").body["data"]} >= {body["id"]}
    # The operator records the expiry in status.
    wait_for("status.expiresAt", lambda: expires_at(crs, body["id"]), 30)

    assert person.api.delete(f"/v3/tokens/{body['id']}").status == 204
    assert token_cr(crs, body["id"]) is None
    assert derived.get("/v3/tokens").status == 404


def test_basic_auth_uses_name_and_key(make_user: Callable[..., Person]) -> None:
    person = make_user()
    assert person.api.token is not None
    assert person.api.as_token(person.api.token, basic=True).get("/v3/tokens").status == 200


def test_a_user_cannot_see_or_delete_another_users_tokens(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    alice, mallory = make_user(), make_user()
    assert alice.api.token is not None
    alices = alice.api.token.split(":")[0]
    assert alices not in {t["id"] for t in mallory.api.get("/v3/tokens").body["data"]}
    for response in (mallory.api.get(f"/v3/tokens/{alices}"),
                     mallory.api.delete(f"/v3/tokens/{alices}")):  # fmt: skip
        assert (response.status, response.body["message"]) == (404, "token not found")
    assert token_cr(crs, alices) is not None


def test_the_current_session_token_cannot_be_deleted(make_user: Callable[..., Person]) -> None:
    person = make_user()
    assert person.api.token is not None
    name = person.api.token.split(":")[0]
    response = person.api.delete(f"/v3/token/{name}")
    assert response.status == 400
    assert (
        response.body["message"] == "Cannot delete token for current session (use logout instead)"
    )
    assert person.api.get("/v3/tokens").status == 200


# -- the error table of spec 7 ------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "status", "message"),
    [
        (None, 401, "must authenticate"),
        ("Bearer no-colon-here", 422, "invalid auth token value"),
        ("Bearer token-abcde:", 422, "invalid auth token value"),
        ("Bearer BAD_NAME:key", 422, "invalid auth token value"),
        ("Basic !!!", 422, "invalid auth token value"),
        ("Bearer token-zzzzz:somekey", 404, "token not found"),
    ],
)
def test_bad_credentials(api: Api, header: str | None, status: int, message: str) -> None:
    headers = {"Authorization": header} if header else {}
    response = api.as_token(None).get("/v3/tokens", headers=headers)
    assert (response.status, response.body["message"]) == (status, message)
    assert response.body["type"] == "error" and response.body["status"] == status


def test_a_wrong_key_is_422(make_user: Callable[..., Person]) -> None:
    person = make_user()
    assert person.api.token is not None
    name = person.api.token.split(":")[0]
    response = person.api.as_token(f"{name}:{hashing.new_key()}").get("/v3/tokens")
    assert (response.status, response.body["message"]) == (422, "invalid auth token value")


def test_tokens_of_a_deleted_user_are_not_found_and_removed(
    api: Api, make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    assert person.api.token is not None
    name = person.api.token.split(":")[0]
    assert api.delete(f"/v3/users/{person.id}").status == 204
    response = person.api.get("/v3/tokens")
    assert (response.status, response.body["message"]) == (404, "token not found")
    wait_for("the operator to delete the user's tokens", lambda: token_cr(crs, name) is None, 30)


def test_expired_tokens_are_410_then_purged(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi,
    setting: Callable[[str, str], None],
) -> None:  # fmt: skip
    person = make_user()
    created = person.api.post("/v3/token", {"ttlMillis": 2000}).body
    short = person.api.as_token(created["token"])
    assert short.get("/v3/tokens").status == 200
    gone = wait_for("expiry", lambda: short.get("/v3/tokens").status == 410, 20)
    assert gone
    assert short.get("/v3/tokens").body["message"] == "must authenticate, expired"
    listed = {t["id"]: t for t in person.api.get("/v3/tokens").body["data"]}
    assert listed[created["id"]]["expired"] is True
    setting("token-purge-interval-minutes", "0.02")
    wait_for("the purge", lambda: token_cr(crs, created["id"]) is None, 30)


def test_idle_sessions_expire_but_derived_tokens_do_not(
    make_user: Callable[..., Person], setting: Callable[[str, str], None]
) -> None:
    person = make_user()
    derived = person.api.as_token(person.api.post("/v3/token", {}).body["token"])
    setting("auth-user-session-idle-ttl-minutes", "0.05")  # 3 s
    fresh = person.api.as_token(person.api.login(person.username, person.password).body["token"])
    assert fresh.get("/v3/tokens").status == 200
    # Polling with the token would be activity and keep it alive: being idle is the condition,
    # so the only way to meet it is to let the idle TTL pass untouched.
    time.sleep(4)
    response = fresh.get("/v3/tokens")
    assert (response.status, response.body["message"]) == (410, "must authenticate, expired")
    assert derived.get("/v3/tokens").status == 200


def test_activity_keeps_a_session_alive_and_is_written_down_sparingly(
    make_user: Callable[..., Person], setting: Callable[[str, str], None],
    crs: k8s.CustomObjectsApi,
) -> None:  # fmt: skip
    person = make_user()
    assert person.api.token is not None
    name = person.api.token.split(":")[0]
    setting("auth-user-session-idle-ttl-minutes", "0.1")  # 6 s
    wait_for("expiry recorded", lambda: expires_at(crs, name), 30)
    version = token_cr(crs, name)["metadata"]["resourceVersion"]
    writes: list[str] = []
    watcher = threading.Thread(target=watch_writes, args=(crs, name, version, writes, 12))
    watcher.start()
    # Used every half second, 18 times: for longer than the idle TTL however long each takes.
    for _ in range(18):
        assert person.api.get("/v3/tokens").status == 200
        time.sleep(0.5)  # pacing the client, not waiting for a condition
    watcher.join()
    annotations = token_cr(crs, name)["metadata"]["annotations"]
    seen = datetime.datetime.fromisoformat(
        annotations["authn.management.svc.io/last-activity"].replace("Z", "+00:00")
    )
    assert datetime.datetime.now(datetime.UTC) - seen < datetime.timedelta(seconds=6)
    # One write at most every half idle TTL (3 s): a handful, for 18 requests.
    assert 1 <= len(writes) <= 5, writes


def watch_writes(
    crs: k8s.CustomObjectsApi, name: str, version: str, writes: list[str], seconds: int
) -> None:
    stream = k8s_watch.Watch().stream(
        crs.list_cluster_custom_object, GROUP, VERSION, "tokens",
        field_selector=f"metadata.name={name}", resource_version=version,
        timeout_seconds=seconds,
    )  # fmt: skip
    for event in stream:
        if event["type"] == "MODIFIED":
            writes.append(event["object"]["metadata"]["resourceVersion"])


# -- TTL clamping (spec 3.1) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("maximum", "requested", "expected"),
    [("0", 0, 0), ("0", 90_000, 90_000), ("10", 0, 600_000), ("10", 60_000, 60_000),
     ("10", 6_000_000, 600_000)],
)  # fmt: skip
def test_ttl_clamping(
    make_user: Callable[..., Person], setting: Callable[[str, str], None],
    maximum: str, requested: int, expected: int,
) -> None:  # fmt: skip
    person = make_user()
    setting("auth-token-max-ttl-minutes", maximum)
    created = person.api.post("/v3/token", {"ttlMillis": requested})
    assert created.status == 201
    assert created.body["ttl"] == expected
    assert (created.body["expiresAt"] == "") == (expected == 0)


def test_a_session_ttl_is_clamped_by_the_maximum_too(
    api: Api, stack: Environment, setting: Callable[[str, str], None]
) -> None:
    setting("auth-token-max-ttl-minutes", "5")
    response = api.login("admin", stack.admin_password)
    session = api.as_token(response.body["token"])
    listed = {t["id"]: t for t in session.get("/v3/tokens").body["data"]}
    assert listed[response.body["id"]]["ttl"] == 300_000


@pytest.mark.parametrize("body", [{"ttlMillis": -1}, {"ttl": "soon"}, {"description": 7}])
def test_invalid_token_requests_are_422_and_create_nothing(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi, body: dict
) -> None:
    person = make_user()
    before = token_names(crs)
    response = person.api.post("/v3/token", body)
    assert response.status == 422 and response.body["type"] == "error"
    assert response.body["fieldName"] in {"ttl", "description"}
    assert token_names(crs) == before


# -- logout -------------------------------------------------------------------------------


def test_logout_deletes_the_session_and_clears_the_cookie(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    assert person.api.token is not None
    name = person.api.token.split(":")[0]
    response = person.api.post("/v3/tokens?action=logout")
    assert response.status == 200
    assert response.cookies["R_SESS"].value == ""
    assert token_cr(crs, name) is None
    assert person.api.get("/v3/tokens").status == 404


def test_logout_all_deletes_every_token_of_the_user_only(
    api: Api, make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person, bystander = make_user(), make_user()
    person.api.post("/v3/token", {"description": "one"})
    person.api.post("/v3/token", {"description": "two"})
    mine = {t["id"] for t in person.api.get("/v3/tokens").body["data"]}
    theirs = {t["id"] for t in bystander.api.get("/v3/tokens").body["data"]}
    assert len(mine) == 3
    assert person.api.post("/v3/tokens?action=logoutAll").status == 200
    assert mine.isdisjoint(token_names(crs))
    assert theirs <= token_names(crs)


# -- stored forms -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("form", "store"),
    [("sha3", hashing.hash_key), ("sha256", hashing.legacy_sha256),
     ("scrypt", hashing.legacy_scrypt), ("unhashed", lambda key: key)],
)  # fmt: skip
def test_every_stored_form_authenticates(
    api: Api, crs: k8s.CustomObjectsApi, form: str, store: Callable[[str], str]
) -> None:
    key, name = hashing.new_key(), f"token-e2e-{form}"
    annotations = {} if form == "unhashed" else {"authn.management.svc.io/token-hashed": "true"}
    crs.create_cluster_custom_object(GROUP, VERSION, "tokens", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Token",
        "metadata": {"name": name, "annotations": annotations,
                     "labels": {"authn.management.svc.io/token-userId": "u-admin"}},
        "spec": {"token": store(key), "userId": "u-admin", "isDerived": True},
    })  # fmt: skip
    holder = api.as_token(f"{name}:{key}")
    assert wait_for(f"{form} token accepted", lambda: holder.get("/v3/tokens").status == 200, 10)
    assert holder.as_token(f"{name}:{hashing.new_key()}").get("/v3/tokens").status == 422


# -- CSRF, rate limit, body limit ---------------------------------------------------------


def test_cookie_requests_that_change_state_need_the_csrf_header(
    api: Api, make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    login = api.login(person.username, person.password, responseType="cookie")
    session, csrf = login.cookies["R_SESS"].value, login.cookies["CSRF"].value
    browser = api.as_token(None)
    cookies = f"R_SESS={session}; CSRF={csrf}"
    before = token_names(crs)
    refused = browser.post("/v3/token", {}, headers={"Cookie": cookies})
    assert (refused.status, refused.body["code"]) == (422, "InvalidCSRFToken")
    wrong = browser.post("/v3/token", {}, headers={"Cookie": cookies, "X-API-CSRF": "0" * 32})
    assert wrong.status == 422
    assert token_names(crs) == before
    assert browser.get("/v3/tokens", headers={"Cookie": cookies}).status == 200  # reads pass
    allowed = browser.post("/v3/token", {}, headers={"Cookie": cookies, "X-API-CSRF": csrf})
    assert allowed.status == 201
    assert person.api.post("/v3/token", {}).status == 201  # bearer callers need no CSRF


def test_rate_limit(api: Api, stack: Environment, make_user: Callable[..., Person]) -> None:
    # Every user is made first: once the limit is 5, the admin is held to it too.
    person, observer, bystander = make_user(), make_user(), make_user()
    set_setting(stack, "api-rate-limit-per-minute", "5")
    try:
        wait_for("the limit to apply", lambda: observer.api.get("/v3/tokens").status == 429, 10)
        room_in_the_minute(10)
        responses = [person.api.get("/v3/tokens") for _ in range(6)]
        assert [r.status for r in responses] == [200] * 5 + [429]
        remaining = [r.headers["X-RateLimit-Remaining"] for r in responses[:5]]
        assert remaining == ["4", "3", "2", "1", "0"]
        refused = responses[-1]
        assert refused.body["code"] == "TooManyRequests"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.headers["X-RateLimit-Limit"] == "5"
        assert bystander.api.get("/v3/tokens").status == 200  # the count is per user
    finally:
        set_setting(stack, "api-rate-limit-per-minute", "100000")
        wait_for("the limit to lift", lambda: person.api.get("/v3/tokens").status == 200, 10)


def test_every_authenticated_answer_carries_the_rate_limit_headers(
    api: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    answers = {
        "ok": person.api.get("/v3/tokens"),
        "absent": person.api.get("/v3/tokens/token-zzzzz"),
        "no route": person.api.get("/v3/no-such-collection"),
        "refused": person.api.post("/v3/clusters", {"name": "x"}),
        "bad body": person.api.post(
            "/v3/token", raw=b"{not json", headers={"Content-Type": "application/json"}
        ),
        "no method": person.api.put("/v3/tokens"),
        "hidden": person.api.post("/v3/clusters/local?action=generateKubeconfig"),
    }
    for what, answer in answers.items():
        assert {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= set(
            answer.headers
        ), (what, answer.status, answer.headers)
    assert [a.status for a in answers.values()][:5] == [200, 404, 404, 403, 400]
    # A request that does not authenticate is no one's to count.
    anonymous = api.as_token("token-zzzzz:nokey").get("/v3/tokens")
    assert anonymous.status == 404 and "X-RateLimit-Limit" not in anonymous.headers


def test_oversized_bodies_are_refused_and_change_nothing(
    api: Api, crs: k8s.CustomObjectsApi
) -> None:
    before = token_names(crs)
    blob = b'{"username": "admin", "password": "' + b"x" * (1024 * 1024) + b'"}'
    login = api.post("/v3-public/localProviders/local?action=login", raw=blob,
                     headers={"Content-Type": "application/json"}, auth=False)  # fmt: skip
    assert (login.status, login.body["code"]) == (413, "RequestEntityTooLarge")
    token = api.post("/v3/token", raw=b'{"description": "' + b"x" * (1024 * 1024) + b'"}',
                     headers={"Content-Type": "application/json"})  # fmt: skip
    assert token.status == 413
    assert token_names(crs) == before


def test_malformed_json_is_400(api: Api) -> None:
    response = api.post("/v3/token", raw=b"{not json", headers={"Content-Type": "application/json"})
    assert (response.status, response.body["code"]) == (400, "InvalidBodyContent")
