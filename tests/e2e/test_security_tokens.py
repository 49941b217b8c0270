"""Issue 9 through HTTPS as a client would: absurd token lifetimes, tokens stored with one,
concurrent login guesses, and settings that are missing, not finite or out of bounds."""

from __future__ import annotations

import datetime
import http.client
import json
import secrets
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person, set_setting
from .test_tokens import GROUP, VERSION, token_cr

USER_FREE_FAILURES = 5  # docs/api.md: "After 5 failures for a username …"
MAX_TTL_MS = 100 * 525_960 * 60_000  # 100 years, the documented bound
END_OF_TIME = "9999-12-31T23:59:59Z"
TTL_SCHEMA = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/ttlMillis"


def token_names(crs: k8s.CustomObjectsApi) -> set[str]:
    items = crs.list_cluster_custom_object(GROUP, VERSION, "tokens")["items"]
    return {t["metadata"]["name"] for t in items}


# -- token lifetimes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b'{"ttl": 1e15}', b'{"ttl": 1000000000000000}', b'{"ttlMillis": 3155760000001}',
     b'{"ttl": 1e400}', b'{"ttl": NaN}', b'{"ttl": 1.5}', b'{"ttl": true}'],
)  # fmt: skip
def test_an_absurd_ttl_is_422_and_stores_nothing(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi, raw: bytes
) -> None:
    person = make_user()
    before = token_names(crs)
    response = person.api.post("/v3/tokens", raw=raw, headers={"Content-Type": "application/json"})
    assert response.status == 422, response.body
    assert (response.body["code"], response.body["fieldName"]) == ("InvalidFormat", "ttl")
    assert token_names(crs) == before
    assert person.api.get("/v3/tokens").status == 200


def test_the_largest_ttl_and_whole_floats_are_accepted(make_user: Callable[..., Person]) -> None:
    person = make_user()
    largest = person.api.post("/v3/tokens", raw=f'{{"ttl": {MAX_TTL_MS}}}'.encode(),
                              headers={"Content-Type": "application/json"})  # fmt: skip
    assert (largest.status, largest.body["ttl"]) == (201, MAX_TTL_MS)
    lifetime = moment(largest.body["expiresAt"]) - moment(largest.body["created"])
    assert lifetime == datetime.timedelta(milliseconds=MAX_TTL_MS)
    hour = person.api.post("/v3/tokens", raw=b'{"ttl": 3.6e6}',
                           headers={"Content-Type": "application/json"})  # fmt: skip
    assert (hour.status, hour.body["ttl"]) == (201, 3_600_000)


def moment(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def unbounded_ttl(management: k8s.ApiClient) -> Iterator[None]:
    """The Token CRD as older versions had it, without a maximum on ttlMillis, for one test:
    how tokens with absurd lifetimes came to be stored."""
    crds = k8s.ApiextensionsV1Api(management)
    crd = crds.read_custom_resource_definition("tokens.management.svc.io").to_dict()
    schema = crd["spec"]["versions"][0]["schema"]["open_apiv3_schema"]
    maximum = schema["properties"]["spec"]["properties"]["ttlMillis"].get("maximum")
    if maximum is not None:
        remove = [{"op": "remove", "path": f"{TTL_SCHEMA}/maximum"}]
        crds.patch_custom_resource_definition("tokens.management.svc.io", remove)
    try:
        yield
    finally:
        if maximum is not None:
            restore = [{"op": "add", "path": f"{TTL_SCHEMA}/maximum", "value": maximum}]
            crds.patch_custom_resource_definition("tokens.management.svc.io", restore)


def store_token(crs: k8s.CustomObjectsApi, user_id: str, ttl_ms: int) -> str:
    """A Token written directly (as kubectl or an older version would), unhashed; returns
    `<name>:<key>`."""
    name, key = f"token-e2e-{secrets.token_hex(4)}", secrets.token_urlsafe(32)
    crs.create_cluster_custom_object(GROUP, VERSION, "tokens", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Token",
        "metadata": {"name": name, "labels": {"authn.management.svc.io/token-userId": user_id}},
        "spec": {"token": key, "userId": user_id, "isDerived": True, "ttlMillis": ttl_ms},
    })  # fmt: skip
    return f"{name}:{key}"


def test_stored_absurd_ttls_break_neither_the_list_nor_the_purge(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi,
    setting: Callable[[str, str], None], unbounded_ttl: None,
) -> None:  # fmt: skip
    person = make_user()
    short = person.api.post("/v3/tokens", {"ttlMillis": 1000}).body["id"]
    legacy = wait_for("a token stored with the int64 maximum",
                      lambda: store_token(crs, person.id, 2**63 - 1), 20)  # fmt: skip
    largest = store_token(crs, person.id, MAX_TTL_MS)
    holder = person.api.as_token(legacy)
    assert wait_for("the legacy token accepted", lambda: holder.get("/v3/tokens").status == 200, 10)

    # Written past the API, the tokens are listed once their watch events reach its cache.
    def both_listed() -> dict[str, Any] | None:
        found = {t["id"]: t for t in person.api.get("/v3/tokens").body["data"]}
        return found if {legacy.split(":")[0], largest.split(":")[0]} <= found.keys() else None

    listed = wait_for("both stored tokens listed", both_listed, 10)
    huge = listed[legacy.split(":")[0]]
    assert (huge["expiresAt"], huge["expired"]) == (END_OF_TIME, False)
    assert not listed[largest.split(":")[0]]["expired"]
    assert wait_for("the operator to record the saturated expiry",
                    lambda: ((token_cr(crs, legacy.split(":")[0]) or {}).get("status") or {})
                    .get("expiresAt") == END_OF_TIME, 20)  # fmt: skip

    wait_for("the short token to expire", lambda: listed_expired(person.api, short), 20)
    setting("token-purge-interval-minutes", "0.02")
    wait_for("the purge of the expired token", lambda: token_cr(crs, short) is None, 30)
    assert token_cr(crs, legacy.split(":")[0]) is not None
    assert token_cr(crs, largest.split(":")[0]) is not None
    for value in (legacy, largest):
        crs.delete_cluster_custom_object(GROUP, VERSION, "tokens", value.split(":")[0])


def listed_expired(api: Api, name: str) -> bool:
    return any(t["id"] == name and t["expired"] for t in api.get("/v3/tokens").body["data"])


# -- login throttle -------------------------------------------------------------------------


LOGIN = "/v3-public/localProviders/local?action=login"


def together(api: Api, count: int, path: str, body: dict[str, str]) -> list[tuple[int, str | None]]:
    """`count` POSTs sent at once: each connection is opened (TLS and all) before any request
    is, so they reach the server together however slowly a loaded client connects. The status
    and Retry-After of each."""
    host, port = api.base.removeprefix("https://").rsplit(":", 1)
    connections = [http.client.HTTPSConnection(host, int(port), context=api.context, timeout=60)
                   for _ in range(count)]  # fmt: skip
    start = threading.Barrier(count)

    def send(connection: http.client.HTTPSConnection) -> tuple[int, str | None]:
        connection.connect()
        start.wait()
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        return answer.status, answer.getheader("Retry-After")

    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            return list(pool.map(send, connections))
    finally:
        for connection in connections:
            connection.close()


def test_concurrent_wrong_logins_are_checked_only_up_to_the_free_failures(
    api: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    responses = together(api, 40, LOGIN, {"username": person.username, "password": "wrong"})
    statuses = [status for status, _ in responses]
    assert set(statuses) <= {401, 429}, statuses
    assert statuses.count(401) <= USER_FREE_FAILURES, statuses
    assert statuses.count(429) >= 40 - USER_FREE_FAILURES
    assert all(int(retry or 0) >= 1 for status, retry in responses if status == 429)

    # Refused attempts are not counted: once the penalty is over, the right password works.
    def right_password() -> bool:
        return api.login(person.username, person.password).status == 201

    assert wait_for("the right password after the penalty", right_password, 20)


# -- settings -------------------------------------------------------------------------------

SETTINGS = [
    "auth-token-max-ttl-minutes", "auth-user-session-ttl-minutes",
    "auth-user-session-idle-ttl-minutes", "kubeconfig-default-token-ttl-minutes",
    "api-rate-limit-per-minute", "token-purge-interval-minutes",
]  # fmt: skip


def stored_value(crs: k8s.CustomObjectsApi, name: str) -> str:
    return str(crs.get_cluster_custom_object(GROUP, VERSION, "settings", name).get("value", ""))


def test_a_put_without_value_is_422_and_an_empty_value_resets(
    api: Api, crs: k8s.CustomObjectsApi
) -> None:
    name = "token-purge-interval-minutes"
    assert api.put(f"/v3/settings/{name}", {"value": "30"}).status == 200
    try:
        for body in ({}, {"value": None}, {"description": "x"}):
            refused = api.put(f"/v3/settings/{name}", body)
            assert refused.status == 422, body
            assert (refused.body["code"], refused.body["fieldName"]) == ("MissingRequired", "value")
            assert stored_value(crs, name) == "30"
    finally:
        reset = api.put(f"/v3/settings/{name}", {"value": ""})
    assert (reset.status, reset.body["value"], reset.body["customized"]) == (200, "60", False)


@pytest.mark.parametrize("name", SETTINGS)
def test_settings_refuse_values_that_are_not_finite_or_out_of_bounds(
    api: Api, crs: k8s.CustomObjectsApi, name: str
) -> None:
    before = stored_value(crs, name)
    for value in ("nan", "NaN", "inf", "Infinity", "1e400", "-1", "1e3", "99999999999", " 5"):
        refused = api.put(f"/v3/settings/{name}", {"value": value})
        assert refused.status == 422, (value, refused.body)
        assert (refused.body["code"], refused.body["fieldName"]) == ("InvalidFormat", "value")
    assert stored_value(crs, name) == before
    if name == "api-rate-limit-per-minute":
        assert api.put(f"/v3/settings/{name}", {"value": "2.5"}).status == 422
        assert stored_value(crs, name) == before


def seen_by(api: Api, name: str, value: str) -> bool:
    return bool(api.get(f"/v3/settings/{name}").body.get("value") == value)


@pytest.mark.parametrize("bad", ["nan", "inf", "1e400"])
def test_a_bad_stored_rate_limit_applies_the_default_and_can_be_fixed(
    stack: Environment, make_user: Callable[..., Person], bad: str
) -> None:
    # Made first: the admin's own requests would count against the default limit of 100.
    # The one who waits for the value is not the one whose limit is read: under load the wait
    # took long enough for its own polling to spend the person's whole 100.
    person, watcher, fixer = make_user(), make_user(), make_user(admin=True)
    name = "api-rate-limit-per-minute"
    set_setting(stack, name, bad)
    try:
        wait_for("the bad value seen", lambda: seen_by(watcher.api, name, bad), 10, interval=0.5)
        response = person.api.get("/v3/tokens")
        assert (response.status, response.headers["X-RateLimit-Limit"]) == (200, "100")
        fixed = fixer.api.put(f"/v3/settings/{name}", {"value": "100000"})
        assert (fixed.status, fixed.body["value"]) == (200, "100000")
    finally:
        set_setting(stack, name, "100000")
        wait_for("the limit restored", lambda: seen_by(watcher.api, name, "100000"), 10,
                 interval=0.5)  # fmt: skip


@pytest.mark.parametrize("bad", ["nan", "inf", "1e400", "-5"])
def test_bad_stored_lifetimes_and_timeouts_apply_their_defaults(
    api: Api, stack: Environment, make_user: Callable[..., Person],
    setting: Callable[[str, str], None], crs: k8s.CustomObjectsApi, bad: str,
) -> None:  # fmt: skip
    person = make_user()
    for name in SETTINGS:
        if name not in ("api-rate-limit-per-minute", "token-purge-interval-minutes"):
            setting(name, bad)
    # The idle timeout is read on every request made with a session.
    assert person.api.get("/v3/tokens").status == 200
    # The maximum lifetime: the default, 0, keeps the request.
    derived = person.api.post("/v3/tokens", {"ttlMillis": 60_000})
    assert (derived.status, derived.body["ttl"]) == (201, 60_000)
    # The session lifetime: the default, 960 minutes.
    login = api.login(person.username, person.password)
    assert login.status == 201, login.body
    assert stored_ttl(crs, login.body["id"]) == 960 * 60_000
    # The kubeconfig lifetime: the default, 960 minutes.
    kubeconfig = api.post("/v3/clusters/local?action=generateKubeconfig")
    assert kubeconfig.status == 200, kubeconfig.body
    assert stored_ttl(crs, "kubeconfig-admin.local") == 960 * 60_000


def stored_ttl(crs: k8s.CustomObjectsApi, name: str) -> Any:
    return (token_cr(crs, name) or {}).get("spec", {}).get("ttlMillis")
