"""What a browser sign-in through OpenID Connect must remember between its two requests (the
redirect to the provider and the provider's redirect back): the `state` it sent, the `nonce`
the ID token must carry and the PKCE code verifier.

It travels in a cookie, encrypted and authenticated (Fernet: AES-CBC with HMAC-SHA256, and a
timestamp checked against a maximum age) under a key every API server replica shares. So any
replica can finish a sign-in another began, nothing is stored per attempt (an unauthenticated
client cannot fill the management cluster with sign-ins it never finishes), an attempt expires
by itself, and neither the browser nor anything that reads the cookie learns the verifier.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass

from cryptography.fernet import Fernet, InvalidToken

MAX_AGE_SECONDS = 600
# A sealed state is a few hundred bytes; anything much longer was not made here.
MAX_SEALED = 2048
RESPONSE_TYPES = ("cookie", "json")
# Where a cookie sign-in may send the browser when it ends: a path on corral itself. Not `//`
# or a backslash after the first slash (browsers read both as another host), nothing but
# printable ASCII, and short enough to fit the sealed cookie.
RETURN_TO = re.compile(r"/(?:[\x21-\x2e\x30-\x5b\x5d-\x7e][\x21-\x5b\x5d-\x7e]{0,254})?")


@dataclass(frozen=True)
class LoginState:
    state: str
    nonce: str
    code_verifier: str
    response_type: str = "cookie"
    # A path on corral the callback redirects to (303) once the session is set; "" for none.
    return_to: str = ""


def valid_return_to(value: str) -> bool:
    return RETURN_TO.fullmatch(value) is not None


def new_key() -> bytes:
    return Fernet.generate_key()


def seal(key: bytes, login: LoginState) -> str:
    return Fernet(key).encrypt(json.dumps(asdict(login)).encode()).decode()


def unseal(key: bytes, sealed: str, now: int | None = None) -> LoginState | None:
    """The state sealed under `key` at most MAX_AGE_SECONDS ago; None for anything else
    (another key, tampered, expired, not a sealed state at all)."""
    if not sealed or len(sealed) > MAX_SEALED or not sealed.isascii():
        return None
    fernet = Fernet(key)
    try:
        if now is None:
            raw = fernet.decrypt(sealed, ttl=MAX_AGE_SECONDS)
        else:
            raw = fernet.decrypt_at_time(sealed, ttl=MAX_AGE_SECONDS, current_time=now)
        fields = json.loads(raw)
        return LoginState(**fields)
    except (InvalidToken, ValueError, TypeError):
        return None
