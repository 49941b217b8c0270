"""The pure parts of sign-in through OpenID Connect: ID token validation (tokens built here
with joserfc and a test key), the sealed sign-in state, the configuration's rules, principals
and groups."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import asdict
from typing import Any

import pytest
from cryptography.fernet import Fernet
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey

from corral.core.auth import id_tokens, loginstate, oidc_config, principals
from corral.core.auth.id_tokens import Expected, InvalidIdToken, UnknownKey
from corral.core.auth.loginstate import LoginState
from corral.core.errors import Invalid
from corral.core.oidc.provider import Provider, ProviderError

ISSUER = "https://id.example.com/realms/corral"
CLIENT = "corral"
NONCE = "n-0S6_WzA2Mj"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
JWKS = {"keys": [KEY.as_dict(private=False)]}
NOW = 1_800_000_000


def claims(**changes: Any) -> dict[str, Any]:
    base = {"iss": ISSUER, "aud": CLIENT, "sub": "f3a1-42", "iat": NOW, "exp": NOW + 300,
            "nonce": NONCE, "groups": ["eng"]}  # fmt: skip
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def signed(payload: dict[str, Any], key: Any = KEY, alg: str = "RS256") -> str:
    return jwt.encode({"alg": alg, "kid": "k1"}, payload, key)


def check(token: str, nonce: str | None = NONCE, jwks: dict[str, Any] = JWKS) -> dict[str, Any]:
    return id_tokens.validate(token, jwks, Expected(ISSUER, CLIENT, nonce), now=NOW)


def test_a_good_id_token_gives_its_claims() -> None:
    assert check(signed(claims()))["sub"] == "f3a1-42"
    assert check(signed(claims(aud=[CLIENT, "other"], azp=CLIENT)))["sub"] == "f3a1-42"
    ec = ECKey.generate_key("P-256", parameters={"kid": "k1"}, private=True)
    ec_jwks = {"keys": [ec.as_dict(private=False)]}
    assert check(signed(claims(), ec, "ES256"), jwks=ec_jwks)["iss"] == ISSUER


@pytest.mark.parametrize(
    ("token_claims", "rule"),
    [
        (claims(iss="https://evil.example.com/realms/corral"), "iss"),
        (claims(iss=None), "iss"),
        (claims(aud="another-client"), "aud"),
        (claims(aud=["another-client"]), "aud"),
        (claims(exp=NOW - 120), "exp"),  # past the 60 s leeway
        (claims(exp=None), "exp"),
        (claims(nonce="replayed"), "nonce"),
        (claims(nonce=None), "nonce"),
        (claims(sub=None), "sub"),
        (claims(sub="x" * 300), "sub"),
        (claims(aud=[CLIENT, "other"], azp="other"), "azp"),
    ],
)
def test_an_id_token_breaking_a_rule_is_refused(token_claims: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidIdToken, match="claims refused"):
        check(signed(token_claims))


def test_unsigned_tokens_are_refused() -> None:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none"}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(claims()).encode()).rstrip(b"=")
    with pytest.raises(InvalidIdToken, match="signature or format"):
        check(f"{header.decode()}.{body.decode()}.")


def test_a_bad_signature_is_refused() -> None:
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
    with pytest.raises(InvalidIdToken, match="signature or format"):
        check(signed(claims(), other))
    head, body, sig = signed(claims()).split(".")
    forged = base64.urlsafe_b64encode(json.dumps(claims(sub="admin")).encode()).rstrip(b"=")
    with pytest.raises(InvalidIdToken):
        check(f"{head}.{forged.decode()}.{sig}")
    del body


def test_an_hmac_token_is_refused_even_with_a_key_that_would_verify_it() -> None:
    """HS256 under a secret the attacker knows: never an accepted algorithm."""
    secret = OctKey.import_key(b"k" * 32, parameters={"kid": "k1"})
    jwks = {"keys": [secret.as_dict(private=True)]}
    with pytest.raises(InvalidIdToken):
        check(signed(claims(), secret, "HS256"), jwks=jwks)


def test_a_key_not_in_the_set_asks_for_the_set_again() -> None:
    rotated = RSAKey.generate_key(2048, parameters={"kid": "k2"}, private=True)
    token = jwt.encode({"alg": "RS256", "kid": "k2"}, claims(), rotated)
    with pytest.raises(UnknownKey):
        check(token)
    assert check(token, jwks={"keys": [rotated.as_dict(private=False)]})["sub"] == "f3a1-42"


def test_a_refreshed_token_needs_no_nonce() -> None:
    assert check(signed(claims(nonce=None)), nonce=None)["sub"] == "f3a1-42"


def test_no_token_or_a_huge_one_is_refused() -> None:
    for value in (None, "", 42, "a" * (id_tokens.MAX_TOKEN + 1)):
        with pytest.raises(InvalidIdToken):
            check(value)  # type: ignore[arg-type]


# -- the sealed sign-in state --------------------------------------------------------------------


def test_the_state_opens_only_under_its_key_and_in_time() -> None:
    key = loginstate.new_key()
    state = LoginState("s", "n", "v" * 48, "json")
    sealed = loginstate.seal(key, state)
    assert "v" * 48 not in sealed  # the verifier is not readable from the cookie
    assert loginstate.unseal(key, sealed) == state
    assert loginstate.unseal(loginstate.new_key(), sealed) is None
    late = int(time.time()) + loginstate.MAX_AGE_SECONDS + 5
    assert loginstate.unseal(key, sealed, now=late) is None
    assert loginstate.unseal(key, sealed[:-4] + "AAAA") is None
    for junk in ("", "x" * (loginstate.MAX_SEALED + 1), "é", "not-a-token"):
        assert loginstate.unseal(key, junk) is None


def test_the_longest_return_path_fits_the_sealed_state() -> None:
    key = loginstate.new_key()
    longest = "/" + "a" * 255
    assert loginstate.valid_return_to(longest)
    state = LoginState("s" * 32, "n" * 32, "v" * 64, "cookie", longest)
    sealed = loginstate.seal(key, state)
    assert len(sealed) <= loginstate.MAX_SEALED
    assert loginstate.unseal(key, sealed) == state


def test_where_a_sign_in_began_is_read_at_any_age_but_only_under_its_key() -> None:
    key = loginstate.new_key()
    sealed = loginstate.seal(key, LoginState("s", "n", "v" * 48, "cookie", "/#/clusters/c-x"))
    assert loginstate.return_to_of(key, sealed) == "/#/clusters/c-x"
    long_ago = json.dumps(asdict(LoginState("s", "n", "v", "cookie", "/#/a"))).encode()
    late = Fernet(key).encrypt_at_time(long_ago, int(time.time()) - 7200).decode()
    assert loginstate.unseal(key, late) is None  # expired: no sign-in finishes with it
    assert loginstate.return_to_of(key, late) == "/#/a"
    assert loginstate.return_to_of(loginstate.new_key(), sealed) == ""
    forged = Fernet(key).encrypt(b'{"return_to": "//evil.example"}').decode()
    for junk in ("", "not-a-token", sealed[:-4] + "AAAA", forged):
        assert loginstate.return_to_of(key, junk) == ""


@pytest.mark.parametrize(
    ("return_to", "page"),
    [("/#/clusters/c-x", "/?signInError=state#/clusters/c-x"), ("/", "/?signInError=state"),
     ("/console#x", "/?signInError=state"), ("/#", "/?signInError=state")],
)  # fmt: skip
def test_a_refusal_goes_to_the_sign_in_page_keeping_only_a_console_page(
    return_to: str, page: str
) -> None:
    assert loginstate.sign_in_page(return_to, "state") == page


@pytest.mark.parametrize("path", ["/", "/#/clusters", "/#/access/providers?x=1", "/console"])
def test_a_return_path_on_corral_is_taken(path: str) -> None:
    assert loginstate.valid_return_to(path)


@pytest.mark.parametrize(
    "path",
    ["", "//evil.example", "/\\evil.example", "/a\\b", "https://evil.example/", "evil",
     "/a b", "/\x00", "/é", "/" + "a" * 256],
)  # fmt: skip
def test_a_return_path_elsewhere_is_refused(path: str) -> None:
    assert not loginstate.valid_return_to(path)


# -- the configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "issuer",
    ["https://id.example.com", "https://id.example.com:8443/realms/a", "http://127.0.0.1:8080/r",
     "http://localhost/realms/x", "http://[::1]:9/r"],
)  # fmt: skip
def test_good_issuers(issuer: str) -> None:
    assert oidc_config.check_issuer(issuer) == issuer


@pytest.mark.parametrize(
    "issuer",
    ["http://id.example.com", "https://id.example.com/?x=1", "https://id.example.com/#f",
     "https://user:pw@id.example.com", "ftp://id.example.com", "https://", "https://a:b/",
     "https://id.example.com/\x00", "https://é.example.com", "", 42, None,
     "https://a.example.com/" + "a" * 1024, "http://10.0.0.1/r"],
)  # fmt: skip
def test_bad_issuers(issuer: Any) -> None:
    with pytest.raises(Invalid) as refused:
        oidc_config.check_issuer(issuer)
    assert refused.value.field == "issuer"


def test_scopes_need_openid_and_no_commas() -> None:
    assert oidc_config.check_scope("openid  profile groups") == "openid profile groups"
    for bad in ("profile email", "openid,profile", 'openid "x"', "x" * 2000, None):
        with pytest.raises(Invalid):
            oidc_config.check_scope(bad)


def test_a_put_merges_checked_fields() -> None:
    current = oidc_config.OidcConfig(issuer="https://a.example.com", client_id="c")
    merged = oidc_config.merged(current, {"groupsClaim": "roles", "enabled": True})
    assert (merged.issuer, merged.groups_claim, merged.enabled) == (
        "https://a.example.com", "roles", True,
    )  # fmt: skip
    for body in ({"enabled": "yes"}, {"clientId": ""}, {"groupsClaim": "a b"}):
        with pytest.raises(Invalid):
            oidc_config.merged(current, body)
    with pytest.raises(Invalid):
        oidc_config.check_client_secret("s\nx")


# -- principals and groups -----------------------------------------------------------------------


def test_groups_become_principals_bounded_and_clean() -> None:
    assert principals.groups_of({"groups": ["eng", "ops", "eng"]}, "groups", "oidc") == [
        "oidc_group://eng", "oidc_group://ops",
    ]  # fmt: skip
    assert principals.groups_of({"groups": "eng"}, "groups", "oidc") == ["oidc_group://eng"]
    assert principals.groups_of({"groups": {"eng": 1}}, "groups", "oidc") == []
    assert principals.groups_of({}, "groups", "oidc") == []
    dirty = ["ok", "bad\r\nImpersonate-User: admin", 7, "x" * 300]
    assert principals.groups_of({"groups": dirty}, "groups", "oidc") == ["oidc_group://ok"]
    many = [f"g{i:04}" for i in range(principals.MAX_GROUPS + 10)]
    assert len(principals.groups_of({"groups": many}, "groups", "oidc")) == principals.MAX_GROUPS


def test_only_a_providers_group_principal_may_be_bound() -> None:
    assert principals.check_group_principal("oidc_group://Platform Team")
    for bad in ("system:masters", "oidc_user://x", "oidc_group://", "local_group://x", 3,
                "oidc_group://a\nb"):  # fmt: skip
        with pytest.raises(Invalid):
            principals.check_group_principal(bad)


# -- discovery -----------------------------------------------------------------------------------


def metadata(**changes: Any) -> dict[str, Any]:
    base = {
        "issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/auth",
        "token_endpoint": f"{ISSUER}/token", "jwks_uri": f"{ISSUER}/certs",
        "response_types_supported": ["code", "id_token"], "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["plain", "S256"],
    }  # fmt: skip
    base.update(changes)
    return base


def discovering(monkeypatch: pytest.MonkeyPatch, document: dict[str, Any]) -> tuple[Any, list[int]]:
    provider = Provider(oidc_config.OidcConfig(issuer=ISSUER, client_id=CLIENT), "secret")
    calls: list[int] = []

    async def load() -> dict[str, Any]:
        calls.append(1)
        provider._app.server_metadata.update(document)
        return provider._app.server_metadata

    monkeypatch.setattr(provider._app, "load_server_metadata", load)
    return provider, calls


async def test_discovery_is_read_once_even_on_a_machine_up_for_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("corral.core.oidc.provider.time.monotonic", lambda: 5.0)
    provider, calls = discovering(monkeypatch, metadata())
    assert (await provider.discover())["issuer"] == ISSUER
    await provider.discover()
    assert calls == [1]


@pytest.mark.parametrize(
    ("document", "rule"),
    [
        (metadata(issuer=ISSUER + "/"), "not the configured"),
        (metadata(response_types_supported=["id_token"]), "code"),
        (metadata(code_challenge_methods_supported=["plain"]), "S256"),
        (metadata(jwks_uri=None), "metadata"),
    ],
)
async def test_a_provider_breaking_discovery_rules_is_refused(
    monkeypatch: pytest.MonkeyPatch, document: dict[str, Any], rule: str
) -> None:
    provider, _ = discovering(monkeypatch, {k: v for k, v in document.items() if v is not None})
    with pytest.raises(ProviderError, match=rule):
        await provider.discover()
