"""Issue 15's token rules as pure logic: the validation order of spec 5.2, system tokens,
kubeconfig token names, the key index, marking expiry and purging idle sessions."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from corral.apiserver.state.stores import _token_key
from corral.core import times
from corral.core.api import names
from corral.core.auth import hashing, ttl
from corral.core.auth.tokens import (
    AuthFailure,
    Policy,
    TokenRecord,
    check,
    is_system_name,
    kubeconfig_token_name,
)
from corral.operator.management.tokens import ExpiryQueue, idle_sessions, mark_expired
from corral.operator.state import State

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)
KEY = hashing.new_key()
MINUTE = datetime.timedelta(minutes=1)


def record(**changes: Any) -> TokenRecord:
    fields: dict[str, Any] = {
        "name": "token-abcde", "user_id": "u-1", "stored": hashing.hash_key(KEY), "ttl_ms": 0,
        "created": NOW - 10 * MINUTE, "kind": "session", "is_derived": False,
        "cluster_name": "", "enabled": True, "description": "", "auth_provider": "local",
        "last_activity": None, "uid": "uid", "version": "1",
    }  # fmt: skip
    fields.update(changes)
    return TokenRecord(**fields)


def outcome(rec: TokenRecord, user_active: bool | None = True, idle: float = 0) -> int:
    try:
        check(rec, KEY, user_active, None, Policy(idle_minutes=idle), NOW)
    except AuthFailure as failure:
        return failure.status
    return 200


# -- spec 5.2: expiry and idleness before the user ------------------------------------------


@pytest.mark.parametrize("user_active", [False, None])
def test_an_expired_token_is_410_whatever_became_of_its_user(user_active: bool | None) -> None:
    expired = record(ttl_ms=60_000)  # made 10 minutes ago
    assert outcome(expired, user_active) == 410
    assert outcome(record(), user_active) == (401 if user_active is False else 404)


@pytest.mark.parametrize("user_active", [False, None])
def test_an_idle_session_is_410_whatever_became_of_its_user(user_active: bool | None) -> None:
    assert outcome(record(), user_active, idle=5) == 410


def test_a_wrong_key_is_422_before_expiry_is_looked_at() -> None:
    with pytest.raises(AuthFailure) as failure:
        check(record(ttl_ms=60_000), "wrong", True, None, Policy(0), NOW)
    assert failure.value.status == 422


# -- system tokens ----------------------------------------------------------------------------


def test_system_tokens_are_the_fixed_names_only() -> None:
    assert {n for n in names.SYSTEM_TOKEN_NAMES if is_system_name(n)} == names.SYSTEM_TOKEN_NAMES
    assert not is_system_name("token-abcde")
    labelled = record(name="token-xyzwv", kind=names.KIND_SYSTEM)
    assert not labelled.is_system  # a label makes no system token


@pytest.mark.parametrize("name", sorted(names.SYSTEM_TOKEN_NAMES))
def test_a_system_token_never_expires_whatever_its_ttl(name: str) -> None:
    system = record(name=name, kind=names.KIND_SYSTEM, ttl_ms=1, is_derived=True)
    assert system.is_system and system.expires_at() is None and not system.expired(NOW)
    assert outcome(system) == 200


# -- kubeconfig token names -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("username", "expected"),
    [
        ("alice", "kubeconfig-alice.c-abcde"),
        ("ops-team-1", "kubeconfig-ops-team-1.c-abcde"),
        ("Alice", "kubeconfig-u-xyz12.c-abcde"),  # capitals cannot be in a name
        ("alice@example.com", "kubeconfig-u-xyz12.c-abcde"),
        ("a.b", "kubeconfig-u-xyz12.c-abcde"),  # the dot separates the cluster
        ("u-bbbbb", "kubeconfig-u-xyz12.c-abcde"),  # `u-` is for ids
        ("-x", "kubeconfig-u-xyz12.c-abcde"),
        ("x" * 64, "kubeconfig-u-xyz12.c-abcde"),
        ("", "kubeconfig-u-xyz12.c-abcde"),
    ],
)
def test_kubeconfig_token_names(username: str, expected: str) -> None:
    assert kubeconfig_token_name(username, "u-xyz12", "c-abcde") == expected


def test_no_username_can_take_another_users_kubeconfig_token_name() -> None:
    # Bob's username is not name-safe, so his token is named by his id; Mallory's username
    # is Bob's id: hers falls back to her own id.
    bob = kubeconfig_token_name("Bob Smith", "u-bbbbb", "local")
    mallory = kubeconfig_token_name("u-bbbbb", "u-mmmmm", "local")
    assert bob != mallory


# -- the key index ----------------------------------------------------------------------------


def test_the_index_digest_is_a_label_value_and_depends_on_the_key_alone() -> None:
    digest = hashing.index_digest(KEY)
    assert digest == hashing.index_digest(KEY) != hashing.index_digest(KEY + "x")
    assert len(digest) == 52 and digest.isalnum() and digest == digest.lower()


def token(name: str, stored: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": name, "creationTimestamp": "2026-11-22T11:00:00Z", "labels": labels or {}}
    return {"metadata": meta, "spec": {"token": stored, "userId": "u-1"}}


def test_tokens_are_indexed_by_the_digest_of_their_key() -> None:
    digest = hashing.index_digest(KEY)
    labelled = token("token-a", hashing.hash_key(KEY), {names.INDEX_TOKEN_KEY: digest})
    unhashed = token("token-b", KEY)
    older = token("token-c", hashing.hash_key(KEY))  # hashed before the label existed
    assert _token_key(labelled) == [digest]
    assert _token_key(unhashed) == [digest]
    assert _token_key(older) == []


# -- expiry marking and idle purge ------------------------------------------------------------


def test_the_expiry_queue_gives_each_token_once_when_its_time_comes() -> None:
    queue = ExpiryQueue()
    queue.add("b", NOW + 2 * MINUTE)
    queue.add("a", NOW + MINUTE)
    queue.add("a", NOW + MINUTE)  # an event again: queued once
    queue.add("c", NOW + MINUTE)
    queue.add("c", NOW + 5 * MINUTE)  # given a longer life
    queue.add("d", NOW)
    queue.forget("d")  # deleted
    assert len(queue) == 3
    assert queue.pop_due(NOW) == []
    assert queue.pop_due(NOW + MINUTE) == ["a"]
    assert queue.pop_due(NOW + 3 * MINUTE) == ["b"]
    assert queue.pop_due(NOW + 5 * MINUTE) == ["c"]
    assert queue.pop_due(NOW + 60 * MINUTE) == [] and len(queue) == 0


def session(name: str, written: datetime.datetime | None, kind: str = "session") -> dict[str, Any]:
    annotations = {names.ANNOTATION_LAST_ACTIVITY: times.format_time(written)} if written else {}
    meta = {"name": name, "creationTimestamp": times.format_time(NOW - 60 * MINUTE),
            "labels": {names.LABEL_TOKEN_KIND: kind}, "annotations": annotations}  # fmt: skip
    return {"metadata": meta, "spec": {"ttlMillis": 0}}


def test_sessions_idle_beyond_doubt_are_purged() -> None:
    tokens = [
        session("busy", NOW - 30 * datetime.timedelta(seconds=1)),
        # Idle 10 minutes by what was written; a use in the last minute may not be written
        # yet, so only past 10 minutes plus a minute and a second is it idle beyond doubt.
        session("borderline", NOW - 11 * MINUTE),
        session("idle", NOW - 12 * MINUTE),
        session("never-used", None),  # made an hour ago
        session("derived", NOW - 50 * MINUTE, kind=""),
        session("kubeconfig", NOW - 50 * MINUTE, kind="kubeconfig"),
    ]
    assert idle_sessions(tokens, 10, NOW) == ["idle", "never-used"]
    assert idle_sessions(tokens, 0, NOW) == []  # the idle timeout is off


def test_a_short_idle_timeout_has_a_short_grace() -> None:
    # Under two minutes the API servers write every half idle timeout.
    assert ttl.activity_write_interval(0.1) == datetime.timedelta(seconds=3)
    assert not ttl.idle_beyond_doubt(NOW - datetime.timedelta(seconds=9), 0.1, NOW)
    assert ttl.idle_beyond_doubt(NOW - datetime.timedelta(seconds=11), 0.1, NOW)


class FakeKube:
    """Gets the given tokens by name; records status patches."""

    def __init__(self, tokens: dict[str, dict[str, Any]]) -> None:
        self.tokens = tokens
        self.patched: list[tuple[str, dict[str, Any]]] = []

    async def get(self, _kind: Any, name: str) -> dict[str, Any]:
        return self.tokens[name]

    async def patch(self, _kind: Any, name: str, body: dict[str, Any], **_: Any) -> dict:
        self.patched.append((name, body["status"]))
        return body


def stored_token(name: str, ttl_ms: int) -> dict[str, Any]:
    meta = {"name": name, "creationTimestamp": times.format_time(NOW - 10 * MINUTE)}
    return {"metadata": meta, "spec": {"ttlMillis": ttl_ms}}


async def test_marking_writes_expired_only_for_tokens_whose_time_has_come() -> None:
    kube = FakeKube({
        "token-due": stored_token("token-due", 60_000),
        # Given a longer life by kubectl since it was queued: queued again, not written.
        "token-longer": stored_token("token-longer", 3_600_000),
    })  # fmt: skip
    state = State(kube, clock=lambda: NOW)  # type: ignore[arg-type]
    queue = ExpiryQueue()
    queue.add("token-due", NOW - 9 * MINUTE)
    queue.add("token-longer", NOW - 9 * MINUTE)
    assert await mark_expired(state, queue) == 1
    assert kube.patched == [
        ("token-due", {"expiresAt": times.format_time(NOW - 9 * MINUTE), "expired": True})
    ]
    assert len(queue) == 1 and queue.pop_due(NOW + 50 * MINUTE) == ["token-longer"]
