"""Token hashing, TTL clamping and the authentication decision: every row of spec 7."""

from __future__ import annotations

import datetime
import logging

import pytest

from corral.core.auth import hashing, ttl
from corral.core.auth.tokens import AuthFailure, Policy, TokenRecord, check, split

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)
KEY = "k" * 43


def record(stored: str, **changes: object) -> TokenRecord:
    fields: dict[str, object] = {
        "name": "token-abcde", "user_id": "u-1", "stored": stored, "ttl_ms": 0,
        "created": NOW - datetime.timedelta(minutes=10), "kind": "session", "is_derived": False,
        "cluster_name": "", "enabled": True, "description": "", "auth_provider": "local",
        "last_activity": None, "uid": "uid", "version": "1",
    }  # fmt: skip
    fields.update(changes)
    return TokenRecord(**fields)  # type: ignore[arg-type]


# -- hashing --------------------------------------------------------------------------------


def test_new_keys_have_32_random_bytes_and_no_colon() -> None:
    keys = {hashing.new_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(":" not in k and len(k) == 43 for k in keys)


def test_new_hashes_are_sha3_with_a_32_byte_salt() -> None:
    stored = hashing.hash_key(KEY)
    version, salt, digest = stored.split(":")
    assert version == "$3"
    assert len(hashing._unb64(salt)) == 32
    assert len(hashing._unb64(digest)) == 64  # SHA3-512
    assert hashing.hash_key(KEY) != stored  # salted


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param(hashing.hash_key(KEY), id="$3"),
        pytest.param(hashing.legacy_sha256(KEY), id="$2"),
        pytest.param(hashing.legacy_scrypt(KEY), id="$1"),
        pytest.param(KEY, id="unhashed"),
    ],
)
def test_every_stored_form_verifies_the_right_key_only(stored: str) -> None:
    assert hashing.verify(stored, KEY)
    assert not hashing.verify(stored, KEY + "x")


def test_rancher_long_forms_verify() -> None:
    import base64
    import hashlib

    salt = b"12345678"
    sha3 = base64.b64encode(hashlib.sha3_512(salt + KEY.encode()).digest()).decode().rstrip("=")
    b64salt = base64.b64encode(salt).decode().rstrip("=")
    assert hashing.verify(f"$3:1:{b64salt}:{sha3}", KEY)
    dk = hashlib.scrypt(KEY.encode(), salt=salt, n=2**15, r=8, p=1, dklen=64, maxmem=2**28)
    scrypt = base64.b64encode(dk).decode().rstrip("=")
    assert hashing.verify(f"$1:{salt.hex()}:15:8:1:{scrypt}", KEY)


def test_corrupt_hash_fails_and_logs_without_the_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert not hashing.verify("$3:not base64!:x", KEY)
        assert not hashing.verify("$9:a:b", KEY)
        assert not hashing.verify(hashing.hash_key("other"), KEY)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["VerifyHash failed"] * 3
    assert KEY not in caplog.text


# -- TTL clamping (spec 3.1) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "maximum", "expected"),
    [
        (0, 0, 0),  # no maximum keeps the request, even "never"
        (5_000, 0, 5_000),
        (0, 60_000, 60_000),  # "never" under a maximum gets the maximum
        (5_000, 60_000, 5_000),  # the lower of the two
        (120_000, 60_000, 60_000),
    ],
)
def test_clamp(requested: int, maximum: int, expected: int) -> None:
    assert ttl.clamp(requested, maximum) == expected


def test_expiry_and_idle() -> None:
    created = NOW - datetime.timedelta(seconds=10)
    assert ttl.expires_at(created, 0) is None
    assert not ttl.is_expired(created, 0, NOW)
    assert ttl.is_expired(created, 10_000, NOW)
    assert not ttl.is_expired(created, 10_001, NOW)
    assert not ttl.is_idle(created, 0, NOW)  # 0 disables
    assert ttl.is_idle(created, 0.1, NOW)  # 6 s allowed, 10 s idle
    assert not ttl.is_idle(created, 1, NOW)


# -- the decision (spec 5.2 and 7) -------------------------------------------------------


@pytest.mark.parametrize("value", ["", "nocolon", "token-abcde:", ":key", "a:b:c", "Bad_Name:key"])
def test_malformed_values_are_422(value: str) -> None:
    with pytest.raises(AuthFailure) as failure:
        split(value)
    assert (failure.value.status, failure.value.message) == (422, "invalid auth token value")


def test_split() -> None:
    assert split("token-abcde:" + KEY) == ("token-abcde", KEY)


def outcome(rec: TokenRecord | None, key: str = KEY, **kwargs: object) -> tuple[int, str]:
    arguments: dict[str, object] = {
        "user_active": True, "last_activity": None, "policy": Policy(idle_minutes=0), "now": NOW,
    }  # fmt: skip
    arguments.update(kwargs)
    try:
        check(rec, key, **arguments)  # type: ignore[arg-type]
    except AuthFailure as failure:
        return failure.status, failure.message
    return 200, ""


def test_outcomes() -> None:
    good = record(hashing.hash_key(KEY))
    assert outcome(good) == (200, "")
    assert outcome(None) == (404, "token not found")
    assert outcome(good, key="wrong") == (422, "invalid auth token value")
    assert outcome(good, user_active=None) == (404, "token not found")
    assert outcome(good, user_active=False)[0] == 401
    assert outcome(record(hashing.hash_key(KEY), enabled=False))[0] == 401
    expired = record(hashing.hash_key(KEY), ttl_ms=60_000)  # created 10 min ago
    assert outcome(expired) == (410, "must authenticate, expired")


def test_idle_timeout_applies_to_session_tokens_only() -> None:
    idle = Policy(idle_minutes=5)
    session = record(hashing.hash_key(KEY))
    derived = record(hashing.hash_key(KEY), kind="", is_derived=True)
    recent = NOW - datetime.timedelta(minutes=1)
    assert outcome(session, policy=idle) == (410, "must authenticate, expired")
    assert outcome(session, policy=idle, last_activity=recent) == (200, "")
    assert outcome(derived, policy=idle) == (200, "")
