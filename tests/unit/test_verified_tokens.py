"""The cache of verified tokens (`auth.verified`): a token's next request skips parsing and
hashing, and each thing that can end a token ends it at once though its key is remembered:
a new version of the token, its deletion, its user disabled, its provider disabled, the clock."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from corral.apiserver.auth import authn
from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.verified import VerifiedTokens
from corral.apiserver.http.errors import ApiError
from corral.apiserver.state.stores import Stores as RealStores
from corral.core.api import names
from corral.core.auth import hashing
from corral.core.auth.tokens import TokenRecord

NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
KEY = hashing.new_key()


class Stores:
    """What authentication reads, held in dicts the tests change as the watches would."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {}
        self.users = {"u-1": True}
        self.providers = {"local": True, "oidc": True}
        self.admins: set[str] = set()
        self.idle_minutes = 0.0
        self.versions = 0
        self.judged = 0  # how many times a holder's standing was judged in full

    def add_token(self, name: str, key: str, **spec: Any) -> None:
        self.versions += 1
        self.tokens[name] = {
            "metadata": {"name": name, "creationTimestamp": "2026-11-28T11:00:00Z",
                         "resourceVersion": str(self.versions), "labels": {}},
            "spec": {"userId": "u-1", "token": hashing.hash_key(key), "authProvider": "local",
                     "isDerived": True, **spec},
        }  # fmt: skip

    def token(self, name: str, key: str) -> dict[str, Any] | None:
        return self.tokens.get(name)

    def token_version(self, name: str) -> str | None:
        found = self.tokens.get(name)
        return found["metadata"]["resourceVersion"] if found else None

    def token_record(self, obj: dict[str, Any]) -> TokenRecord:
        return TokenRecord.from_object(obj)

    def user_active(self, user_id: str) -> bool | None:
        self.judged += 1
        return self.users.get(user_id)

    def number(self, name: str) -> float:
        return self.idle_minutes if name == "auth-user-session-idle-ttl-minutes" else 0

    def is_admin(self, user_id: str) -> bool:
        return user_id in self.admins

    def provider_enabled(self, provider: str) -> bool:
        return self.providers.get(provider, False)

    def groups(self, user_id: str) -> tuple[str, ...]:
        return ()

    def standing_stamp(self) -> object:
        """Moves whenever a user, a binding, a provider or a setting changes, as the caches'
        versions do."""
        return (tuple(self.users.items()), tuple(self.providers.items()),
                frozenset(self.admins), self.idle_minutes)  # fmt: skip


@pytest.fixture
def stores() -> Stores:
    held = Stores()
    held.add_token("token-a", KEY)
    return held


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The stored values each key verification hashed against."""
    calls: list[str] = []
    verify = hashing.verify

    def counting(stored: str, key: str) -> bool:
        calls.append(stored)
        return verify(stored, key)

    monkeypatch.setattr(hashing, "verify", counting)
    yield calls


def status(stores: Stores, known: VerifiedTokens, value: str,
           now: datetime.datetime = NOW) -> int:  # fmt: skip
    return caller(stores, known, value, now)[0]


def caller(
    stores: Stores, known: VerifiedTokens, value: str, now: datetime.datetime = NOW
) -> tuple[int, authn.Principal | None]:
    """The status of a request with `value` (each from a replica that saw no earlier use of
    it), and whom it authenticated."""
    request = make_mocked_request("GET", "/v3/users", headers={"Authorization": f"Bearer {value}"})
    activity = ActivityTracker(lambda token, seen: asyncio.sleep(0))
    try:
        who = authn.authenticate(request, stores, activity, known, now)  # type: ignore[arg-type]
    except ApiError as error:
        return error.status, None
    return 200, who


def test_a_verified_key_is_not_hashed_again(stores: Stores, hashed: list[str]) -> None:
    known = VerifiedTokens()
    assert [status(stores, known, f"token-a:{KEY}") for _ in range(3)] == [200] * 3
    assert len(hashed) == 1


def test_a_wrong_key_for_a_remembered_token_is_verified_and_refused(
    stores: Stores, hashed: list[str]
) -> None:
    known = VerifiedTokens()
    assert status(stores, known, f"token-a:{KEY}") == 200
    assert status(stores, known, f"token-a:{hashing.new_key()}") == 422
    assert len(hashed) == 2
    assert status(stores, known, f"token-a:{KEY}") == 200  # still remembered
    assert len(hashed) == 2


def test_a_new_version_of_the_token_is_verified_again(stores: Stores, hashed: list[str]) -> None:
    known = VerifiedTokens()
    assert status(stores, known, f"token-a:{KEY}") == 200
    stores.add_token("token-a", hashing.new_key())  # the key regenerated: the old one is done
    assert status(stores, known, f"token-a:{KEY}") == 422
    assert len(hashed) == 2


def test_a_deleted_token_is_not_found_though_its_key_was_verified(stores: Stores) -> None:
    known = VerifiedTokens()
    assert status(stores, known, f"token-a:{KEY}") == 200
    del stores.tokens["token-a"]
    assert status(stores, known, f"token-a:{KEY}") == 404
    assert len(known) == 0


def test_a_token_made_again_under_the_same_name_is_verified_afresh(
    stores: Stores, hashed: list[str]
) -> None:
    known = VerifiedTokens()
    assert status(stores, known, f"token-a:{KEY}") == 200
    del stores.tokens["token-a"]
    stores.add_token("token-a", KEY)
    assert status(stores, known, f"token-a:{KEY}") == 200
    assert len(hashed) == 2


def test_a_disabled_user_is_refused_at_the_next_request(stores: Stores) -> None:
    known = VerifiedTokens()
    assert status(stores, known, f"token-a:{KEY}") == 200
    stores.users["u-1"] = False
    assert status(stores, known, f"token-a:{KEY}") == 401
    del stores.users["u-1"]
    assert status(stores, known, f"token-a:{KEY}") == 404


def test_a_disabled_provider_is_refused_at_the_next_request(stores: Stores) -> None:
    stores.add_token("token-o", KEY, authProvider="oidc")
    known = VerifiedTokens()
    assert status(stores, known, f"token-o:{KEY}") == 200
    stores.providers["oidc"] = False
    assert status(stores, known, f"token-o:{KEY}") == 401


def test_a_remembered_token_still_expires(stores: Stores) -> None:
    stores.add_token("token-t", KEY, ttlMillis=3_600_000)  # made at 11:00, good until 12:00
    known = VerifiedTokens()
    earlier = NOW - datetime.timedelta(minutes=1)
    assert status(stores, known, f"token-t:{KEY}", earlier) == 200
    assert status(stores, known, f"token-t:{KEY}", NOW) == 410


def test_a_holder_is_judged_once_while_nothing_it_rests_on_moves(stores: Stores) -> None:
    known = VerifiedTokens()
    assert [status(stores, known, f"token-a:{KEY}") for _ in range(3)] == [200] * 3
    assert stores.judged == 1


def test_a_user_made_administrator_is_one_at_the_next_request(stores: Stores) -> None:
    known = VerifiedTokens()
    assert caller(stores, known, f"token-a:{KEY}")[1].is_admin is False  # type: ignore[union-attr]
    stores.admins.add("u-1")
    assert caller(stores, known, f"token-a:{KEY}")[1].is_admin is True  # type: ignore[union-attr]


def test_a_remembered_session_still_goes_idle(stores: Stores) -> None:
    stores.add_token("token-s", KEY, ttlMillis=0)
    stores.tokens["token-s"]["metadata"]["labels"][names.LABEL_TOKEN_KIND] = names.KIND_SESSION
    stores.idle_minutes = 90  # made at 11:00, unused since: idle after 12:30
    known = VerifiedTokens()
    assert status(stores, known, f"token-s:{KEY}", NOW) == 200
    assert status(stores, known, f"token-s:{KEY}", NOW + datetime.timedelta(minutes=30)) == 200
    assert status(stores, known, f"token-s:{KEY}", NOW + datetime.timedelta(minutes=31)) == 410


def test_a_shorter_idle_timeout_ends_a_remembered_session_at_the_next_request(
    stores: Stores,
) -> None:
    stores.add_token("token-s", KEY, ttlMillis=0)
    stores.tokens["token-s"]["metadata"]["labels"][names.LABEL_TOKEN_KIND] = names.KIND_SESSION
    stores.idle_minutes = 90
    known = VerifiedTokens()
    assert status(stores, known, f"token-s:{KEY}") == 200
    stores.idle_minutes = 30  # unused since 11:00: an hour idle
    assert status(stores, known, f"token-s:{KEY}") == 410


def test_the_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    known = VerifiedTokens(size=2)
    records = [record(f"token-{n}") for n in "abc"]
    known.put(KEY, "1", records[0])
    known.put(KEY, "1", records[1])
    assert known.get("token-a", KEY, "1") is records[0]  # a is now the most recent
    known.put(KEY, "1", records[2])
    assert len(known) == 2
    assert known.get("token-b", KEY, "1") is None
    assert known.get("token-a", KEY, "1") is records[0]


def test_what_is_remembered_holds_no_copy_of_the_key() -> None:
    known = VerifiedTokens()
    known.put(KEY, "1", record("token-a"))
    held = repr(vars(known)).encode()
    assert KEY.encode() not in held
    assert hashing.index_digest(KEY).encode() not in held


def test_an_object_never_stored_is_not_remembered() -> None:
    known = VerifiedTokens()
    known.put(KEY, None, record("token-a"))
    assert len(known) == 0


def record(name: str) -> TokenRecord:
    return TokenRecord(
        name=name, user_id="u-1", stored=hashing.hash_key(KEY), ttl_ms=0, created=NOW,
        kind="", is_derived=True, cluster_name="", enabled=True, description="",
        auth_provider="local", last_activity=None, uid="", version="",
    )  # fmt: skip


def test_a_token_object_is_parsed_once_per_version() -> None:
    stores = RealStores.create(None)  # type: ignore[arg-type]  # nothing here talks to Kubernetes
    held = Stores()
    held.add_token("token-a", KEY)
    obj = held.tokens["token-a"]
    first = stores.token_record(obj)
    assert stores.token_record(obj) is first
    changed = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "99"}}
    assert stores.token_record(changed) is not first
    assert stores.token_record(changed) == dataclasses.replace(first, version="99")


def test_the_token_cache_keeps_no_managed_fields_and_one_copy_of_repeated_strings() -> None:
    stores = RealStores.create(None)  # type: ignore[arg-type]  # nothing here talks to Kubernetes
    held = Stores()
    for name in ("token-a", "token-b"):
        held.add_token(name, KEY)
        obj = held.tokens[name]
        written = {"apiVersion": "management.svc.io/v3", "kind": "Token", **obj}
        written["metadata"] = {**obj["metadata"], "managedFields": [{"manager": "corral"}]}
        # As a watch brings it: each object's strings are its own.
        written["spec"] = {**obj["spec"], "userId": "".join(["u-", "1"])}
        stores.tokens.put(written)
    a, b = stores.tokens.get("token-a"), stores.tokens.get("token-b")
    assert a is not None and b is not None
    assert "managedFields" not in a["metadata"]
    assert a["spec"] == held.tokens["token-a"]["spec"]
    assert a["spec"]["userId"] is b["spec"]["userId"]


@pytest.mark.parametrize(
    ("cache", "obj"),
    [
        ("users", {"metadata": {"name": "u-1"}, "spec": {"enabled": False}}),
        ("bindings", {"metadata": {"name": "grb-1"}, "spec": {"globalRoleName": "admin"}}),
        ("user_attributes", {"metadata": {"name": "u-1"}, "groupPrincipals": {}}),
        ("settings", {"metadata": {"name": "auth-user-session-idle-ttl-minutes"}, "value": "5"}),
        ("authconfigs", {"metadata": {"name": "oidc"}, "spec": {"enabled": False}}),
    ],
)
def test_the_standing_stamp_moves_with_every_cache_a_standing_reads(
    cache: str, obj: dict[str, Any]
) -> None:
    stores = RealStores.create(None)  # type: ignore[arg-type]  # nothing here talks to Kubernetes
    before = stores.standing_stamp()
    getattr(stores, cache).put(obj)
    assert stores.standing_stamp() != before


def test_a_number_setting_is_read_again_once_the_settings_move() -> None:
    stores = RealStores.create(None)  # type: ignore[arg-type]  # nothing here talks to Kubernetes
    name = "auth-user-session-idle-ttl-minutes"
    stores.settings.put({"metadata": {"name": name}, "value": "5"})
    assert stores.number(name) == 5
    stores.settings.put({"metadata": {"name": name}, "value": "7"})
    assert stores.number(name) == 7
