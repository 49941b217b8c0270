"""Issue 9: bounded and saturating token lifetimes, a purge that one bad token cannot stop, a
login throttle that counts before it verifies, and settings that are finite and bounded."""

from __future__ import annotations

import datetime
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube import ApiError as KubeApiError

from corral.apiserver.auth.throttle import (
    ADDRESS_FREE_FAILURES,
    FORGET_AFTER,
    MAX_PENALTY,
    PENDING_HOLD,
    USER_FREE_FAILURES,
    LoginThrottle,
)
from corral.apiserver.routes.tokens import fields
from corral.core import settings as corral_settings
from corral.core import times
from corral.core.auth import ttl
from corral.core.auth.tokens import TokenRecord
from corral.operator.management.tokens import expired, expiry_status, interval_seconds, purge

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)
CREATED = "2026-11-22T11:00:00Z"
SECRET = "$3:c2FsdA:the-hashed-key-that-must-never-be-logged"
LARGEST = 2**63 - 1  # what an int64 field held before lifetimes were bounded

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)
MOMENTS = st.datetimes(
    min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(9999, 12, 31),
    timezones=st.just(datetime.UTC),
)  # fmt: skip


def token(name: str, ttl_ms: Any, created: Any = CREATED, kind: str = "") -> dict[str, Any]:
    labels = {"authn.management.svc.io/kind": kind} if kind else {}
    meta = {"name": name, "labels": labels, "creationTimestamp": created}
    return {"metadata": meta, "spec": {"ttlMillis": ttl_ms, "token": SECRET, "userId": "u-1"}}


# -- requested lifetimes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (3_600_000, 3_600_000), (3.6e6, 3_600_000), (ttl.MAX_TTL_MS, ttl.MAX_TTL_MS),
     (float(ttl.MAX_TTL_MS), ttl.MAX_TTL_MS)],
)  # fmt: skip
def test_whole_lifetimes_up_to_100_years_are_accepted(value: float, expected: int) -> None:
    assert ttl.requested(value) == expected


@pytest.mark.parametrize(
    "value",
    [1e15, ttl.MAX_TTL_MS + 1, 10**400, -1, 1.5, math.nan, math.inf, -math.inf, True, "5", None],
)
def test_other_lifetimes_are_refused(value: object) -> None:
    with pytest.raises(ttl.TtlError):
        ttl.requested(value)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_value_is_a_bounded_lifetime_or_a_ttl_error(value: object) -> None:
    try:
        result = ttl.requested(value)
    except ttl.TtlError:
        return
    assert type(result) is int and 0 <= result <= ttl.MAX_TTL_MS


# -- expiry saturates -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(MOMENTS, st.integers(min_value=-(2**80), max_value=2**80))
def test_expiry_never_overflows(created: datetime.datetime, ttl_ms: int) -> None:
    expiry = ttl.expires_at(created, ttl_ms)
    if ttl_ms == 0:
        assert expiry is None
        return
    assert expiry is not None and created <= expiry <= ttl.END_OF_TIME
    assert times.format_time(expiry)
    ttl.is_expired(created, ttl_ms, NOW)


def test_the_largest_allowed_lifetime_fits_and_a_larger_one_saturates() -> None:
    created = times.parse_time(CREATED)
    assert ttl.expires_at(created, ttl.MAX_TTL_MS) == created + datetime.timedelta(days=36_525)
    assert ttl.expires_at(created, LARGEST) == ttl.END_OF_TIME
    assert times.format_time(ttl.END_OF_TIME) == "9999-12-31T23:59:59Z"


def test_a_stored_huge_lifetime_renders_and_never_expires() -> None:
    record = TokenRecord.from_object({**token("token-huge", LARGEST),
                                      "metadata": {"name": "token-huge",
                                                   "creationTimestamp": CREATED}})  # fmt: skip
    assert not record.expired(NOW)
    body = fields(record, "", NOW)
    assert (body["expiresAt"], body["expired"], body["ttl"]) == (
        "9999-12-31T23:59:59Z", False, LARGEST,
    )  # fmt: skip


# -- the operator: one bad token never stops the others -------------------------------------


def test_expiry_status_saturates() -> None:
    assert expiry_status(token("huge", LARGEST), NOW) == {
        "expiresAt": "9999-12-31T23:59:59Z", "expired": False,
    }  # fmt: skip


def test_malformed_tokens_are_logged_by_name_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    tokens = [token("huge", LARGEST), token("bad-ttl", "soon"), token("bad-time", 1, "never"),
              {"metadata": {"name": "no-time"}}, token("old", 60_000)]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="corral.operator.management.tokens"):
        assert expired(tokens, NOW) == ["old"]
    logged = caplog.text
    assert all(name in logged for name in ("bad-ttl", "bad-time", "no-time"))
    assert "huge" not in logged  # saturated, not malformed
    assert SECRET not in logged and "hashed-key" not in logged


class FakeKube:
    """Lists the given tokens; refuses to delete the names in `refuse`."""

    def __init__(self, tokens: list[dict[str, Any]], refuse: set[str]) -> None:
        self.tokens, self.refuse = tokens, refuse
        self.deleted: list[str] = []

    async def list(self, _resource: Any) -> AsyncIterator[dict[str, Any]]:
        for item in self.tokens:
            yield item

    async def delete(self, _resource: Any, name: str, namespace: str | None = None) -> None:
        if name in self.refuse:
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                      "reason": "InternalError", "message": "etcd is unhappy"}  # fmt: skip
            request = httpx2.Request("DELETE", f"https://kube/tokens/{name}")
            response = httpx2.Response(500, request=request, content=json.dumps(status).encode(),
                                       headers={"Content-Type": "application/json"})  # fmt: skip
            raise KubeApiError(request=request, response=response)
        self.deleted.append(name)


async def test_a_token_that_cannot_be_deleted_does_not_stop_the_purge() -> None:
    tokens = [token("stuck", 60_000), token("huge", LARGEST), token("bad", "x"),
              token("old", 60_000), token("system-operator", 60_000, kind="system")]  # fmt: skip
    kube = FakeKube(tokens, refuse={"stuck"})
    assert await purge(kube, NOW) == 1  # type: ignore[arg-type]
    assert kube.deleted == ["old"]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("0.02", 1.2), ("30", 1800), ("nan", 3600), ("inf", 3600), ("1e400", 3600), ("-1", 3600),
     ("0", 3600), ("", 3600)],
)  # fmt: skip
def test_the_purge_interval_falls_back_to_the_default(value: str, seconds: float) -> None:
    assert interval_seconds({"value": value, "default": "60"}) == pytest.approx(seconds)


# -- the login throttle ---------------------------------------------------------------------


def test_concurrent_attempts_are_counted_before_any_is_verified() -> None:
    throttle = LoginThrottle()
    waits = [throttle.reserve("bob", "10.0.0.1", 0.0) for _ in range(40)]
    assert waits.count(0) == USER_FREE_FAILURES
    assert all(w == 1.0 for w in waits[USER_FREE_FAILURES:])


def test_no_penalty_runs_out_while_an_attempt_is_still_being_checked() -> None:
    throttle = LoginThrottle()
    for _ in range(USER_FREE_FAILURES):
        assert throttle.reserve("bob", "10.0.0.1", 0.0) == 0
    # The checks are slower than the first penalty (a loaded server hashing).
    assert throttle.reserve("bob", "10.0.0.1", 5.0) == 1.0
    for _ in range(USER_FREE_FAILURES - 1):
        throttle.refused("bob", "10.0.0.1", 6.0)
    assert throttle.reserve("bob", "10.0.0.1", 8.0) == 1.0
    throttle.refused("bob", "10.0.0.1", 8.5)
    assert throttle.reserve("bob", "10.0.0.1", 9.0) == 0.5
    assert throttle.reserve("bob", "10.0.0.1", 9.5) == 0


def test_a_check_that_never_ends_holds_the_penalty_for_a_bounded_time() -> None:
    throttle = LoginThrottle()
    for _ in range(USER_FREE_FAILURES):
        throttle.reserve("bob", "10.0.0.1", 0.0)  # never judged: its worker was killed
    assert throttle.retry_after("bob", "", PENDING_HOLD - 1) == 1.0
    assert throttle.retry_after("bob", "", PENDING_HOLD + 1) == 0


def test_a_penalty_doubles_per_failure_up_to_the_maximum() -> None:
    throttle = LoginThrottle()
    now = 0.0
    for failure in range(1, 30):
        now += throttle.retry_after("bob", "", now)  # each penalty waited out
        assert throttle.reserve("bob", f"10.0.0.{failure}", now) == 0
        throttle.refused("bob", f"10.0.0.{failure}", now)
        expected = min(2.0 ** (failure - USER_FREE_FAILURES), MAX_PENALTY)
        assert throttle.retry_after("bob", "", now) == (
            expected if failure >= USER_FREE_FAILURES else 0
        )


def test_refused_attempts_do_not_lengthen_the_penalty() -> None:
    throttle = LoginThrottle()
    for _ in range(USER_FREE_FAILURES):
        throttle.reserve("bob", "10.0.0.1", 0.0)
        throttle.refused("bob", "10.0.0.1", 0.0)
    for _ in range(100):
        assert throttle.reserve("bob", "10.0.0.1", 0.5) == 0.5
    assert throttle.reserve("bob", "10.0.0.1", 1.0) == 0  # the right password now gets checked


def test_a_success_clears_the_username_and_gives_the_address_its_attempt_back() -> None:
    throttle = LoginThrottle()
    for _ in range(ADDRESS_FREE_FAILURES * 2):  # many honest logins from one address
        assert throttle.reserve("alice", "10.0.0.1", 0.0) == 0
        throttle.succeeded("alice", "10.0.0.1")
    assert throttle.retry_after("mallory", "10.0.0.1", 0.0) == 0


def test_an_attempt_never_judged_is_given_back() -> None:
    throttle = LoginThrottle()
    for _ in range(USER_FREE_FAILURES * 3):
        assert throttle.reserve("bob", "10.0.0.1", 0.0) == 0
        throttle.release("bob", "10.0.0.1")


def test_the_address_is_limited_across_usernames_and_counts_are_forgotten() -> None:
    throttle = LoginThrottle()
    waits = [throttle.reserve(f"user-{n}", "10.0.0.1", 0.0) for n in range(ADDRESS_FREE_FAILURES)]
    assert waits == [0] * ADDRESS_FREE_FAILURES
    assert throttle.reserve("someone-else", "10.0.0.1", 0.0) == 1.0
    assert throttle.reserve("someone-else", "10.0.0.1", FORGET_AFTER + 1) == 0


# -- settings -------------------------------------------------------------------------------

NUMBERS = sorted(n for n, d in corral_settings.CATALOG.items() if d.parse is None)
NAMES = st.sampled_from(NUMBERS)


@pytest.mark.parametrize(
    "value", ["nan", "NaN", "inf", "-inf", "1e400", "1e3", "-1", " 5", "5 ", "1_000", "0x10",
              "٣", "5.", ".5", "", "99999999999999999"],
)  # fmt: skip
def test_only_plain_bounded_decimals_are_setting_values(value: str) -> None:
    with pytest.raises(corral_settings.SettingValueError):
        corral_settings.as_number("auth-token-max-ttl-minutes", value)


def test_each_setting_has_its_own_kind_and_bounds() -> None:
    assert corral_settings.as_number("auth-user-session-idle-ttl-minutes", "0.05") == 0.05
    assert corral_settings.as_number("auth-token-max-ttl-minutes", "52596000") == 52_596_000
    with pytest.raises(corral_settings.SettingValueError):
        corral_settings.as_number("auth-token-max-ttl-minutes", "52596001")
    assert corral_settings.as_number("api-rate-limit-per-minute", "100000") == 100_000
    for refused in ("2.5", "1000001"):
        with pytest.raises(corral_settings.SettingValueError, match="whole number"):
            corral_settings.as_number("api-rate-limit-per-minute", refused)
    with pytest.raises(corral_settings.SettingValueError):
        corral_settings.as_number("token-purge-interval-minutes", "0")


@settings(max_examples=300, deadline=None)
@given(NAMES, st.text(max_size=30) | st.from_regex(r"[0-9]{1,16}(\.[0-9]{1,10})?", fullmatch=True))
def test_a_setting_parses_to_a_finite_bounded_number_or_a_setting_error(
    name: str, text: str
) -> None:
    definition = corral_settings.CATALOG[name]
    try:
        number = corral_settings.as_number(name, text)
    except corral_settings.SettingValueError:
        return
    assert math.isfinite(number)
    assert definition.minimum <= number <= definition.maximum
    assert not definition.whole or number.is_integer()


@settings(max_examples=300, deadline=None)
@given(NAMES, st.dictionaries(st.sampled_from(["value", "default", "other"]), JSON) | st.none())
def test_reading_any_stored_setting_never_raises(name: str, stored: dict[str, Any] | None) -> None:
    definition = corral_settings.CATALOG[name]
    number = corral_settings.number(name, stored)
    assert math.isfinite(number) and definition.minimum <= number <= definition.maximum


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-5", "lots"])
def test_a_bad_stored_setting_reads_as_the_default(value: str) -> None:
    for name in NUMBERS:
        definition = corral_settings.CATALOG[name]
        stored = {"value": value, "default": definition.default}
        assert corral_settings.number(name, stored) == float(definition.default)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(set(corral_settings.CATALOG) - set(NUMBERS))),
    st.dictionaries(st.sampled_from(["value", "default", "other"]), JSON) | st.none(),
)
def test_a_document_setting_reads_as_a_value_it_accepts(
    name: str, stored: dict[str, Any] | None
) -> None:
    text = corral_settings.document(name, stored)
    corral_settings.check(name, text)
    value = (stored or {}).get("value")
    if isinstance(value, str) and value and text != value:
        with pytest.raises(corral_settings.SettingValueError):
            corral_settings.check(name, value)
