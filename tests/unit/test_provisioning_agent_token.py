from __future__ import annotations

import base64
import datetime
import json

import pytest

from corral.core.provisioning import agent_token

NOW = datetime.datetime(2026, 11, 29, 1, 0, tzinfo=datetime.UTC)


def jwt(claims: object) -> str:
    """A token shaped as the apiserver's: header, claims and signature, base64url unpadded."""

    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def test_the_expiry_is_read_from_the_exp_claim() -> None:
    expiry = NOW + agent_token.LIFETIME
    token = jwt({"sub": "system:serviceaccount:svc-system:corral", "exp": int(expiry.timestamp())})
    assert agent_token.expires(token) == expiry


@pytest.mark.parametrize(
    "token",
    [
        jwt({"sub": "system:serviceaccount:svc-system:corral"}),  # legacy: no exp
        jwt({"exp": "1893456000"}),
        jwt({"exp": True}),
        jwt(["exp", 1893456000]),
        "not-a-jwt",
        "a.%%%.c",
        "a.bm90IGpzb24.c",
    ],
)
def test_a_token_without_a_readable_expiry_has_none(token: str) -> None:
    assert agent_token.expires(token) is None
    assert not agent_token.renewal_due(token, NOW)


def test_a_token_is_renewed_only_within_renew_before_of_its_expiry() -> None:
    expiry = NOW + agent_token.LIFETIME
    token = jwt({"exp": int(expiry.timestamp())})
    assert not agent_token.renewal_due(token, NOW)
    assert not agent_token.renewal_due(token, expiry - agent_token.RENEW_BEFORE)
    second = datetime.timedelta(seconds=1)
    assert agent_token.renewal_due(token, expiry - agent_token.RENEW_BEFORE + second)
    assert agent_token.renewal_due(token, expiry + second)


def test_no_token_owes_no_renewal() -> None:
    assert not agent_token.renewal_due(None, NOW)
