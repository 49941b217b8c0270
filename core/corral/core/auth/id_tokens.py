"""Whether an ID token is good (OpenID Connect Core 3.1.3.7): signed by a key of the
provider's JWKS with an asymmetric algorithm, issued by the configured issuer for this client,
not expired, and carrying the nonce of the sign-in it answers.

The signature is checked by joserfc (authlib's own JOSE library), the claims by authlib's
`CodeIDToken` (nonce, `azp`, `at_hash`) under a registry of the iss, aud, exp and sub rules.
Pure: the caller hands over the key set it fetched and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from authlib.oidc.core import CodeIDToken
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet

from corral.core.auth import principals
from corral.core.errors import Invalid

# Asymmetric only: never `none`, and never an HMAC whose secret would be a public key or the
# client secret (which every replica and the provider know).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
              "EdDSA")  # fmt: skip
# Clocks of corral and the provider may differ by this much.
LEEWAY_SECONDS = 60
MAX_TOKEN = 16 * 1024


class InvalidIdToken(Exception):
    """The ID token must not be believed; the message says which rule it broke (never the
    token)."""


class UnknownKey(InvalidIdToken):
    """Signed with a key the key set does not hold: the provider may have rotated its keys."""


@dataclass(frozen=True)
class Expected:
    issuer: str
    client_id: str
    nonce: str | None  # None for a token from a refresh, which answers no sign-in


def validate(
    raw: Any,
    jwks: Mapping[str, Any],
    expected: Expected,
    access_token: str | None = None,
    now: int | None = None,
) -> dict[str, Any]:
    """The ID token's claims, once every rule holds; InvalidIdToken otherwise."""
    if not isinstance(raw, str) or not 0 < len(raw) <= MAX_TOKEN:
        raise InvalidIdToken("no ID token, or one too long")
    try:
        key_set = KeySet.import_key_set(dict(jwks))  # type: ignore[arg-type]
    except (JoseError, ValueError, TypeError, KeyError) as exc:
        message = f"the provider's key set cannot be read: {type(exc).__name__}"
        raise InvalidIdToken(message) from None
    try:
        token = jwt.decode(raw, key_set, algorithms=list(ALGORITHMS))
    except InvalidKeyIdError:
        raise UnknownKey("signed with a key the provider's key set does not hold") from None
    except (JoseError, ValueError, TypeError) as exc:
        raise InvalidIdToken(f"signature or format refused: {type(exc).__name__}") from None
    options: dict[str, Any] = {
        "iss": {"essential": True, "value": expected.issuer},
        "aud": {"essential": True, "value": expected.client_id},
        "exp": {"essential": True},
        "sub": {"essential": True},
    }
    params = {"nonce": expected.nonce, "client_id": expected.client_id}
    if access_token:
        params["access_token"] = access_token
    claims = CodeIDToken(token.claims, token.header, options, params)
    try:
        claims.validate(now=now, leeway=LEEWAY_SECONDS)
        principals.check_subject(claims["sub"])
    except (JoseError, Invalid) as exc:
        raise InvalidIdToken(f"claims refused: {exc}") from None
    return dict(claims)
