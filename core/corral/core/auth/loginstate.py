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
# The cookie outlives the attempt: a browser that comes back late still says where its
# sign-in began, so the console can be told the attempt expired (see `return_to_of`).
COOKIE_MAX_AGE_SECONDS = 3600
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


# Why a console's sign-in did not complete, as its sign-in page is told (`?signInError=`): a
# fixed word, never anything the provider sent.
REFUSAL_REASONS = frozenset({
    "cancelled",  # the provider answered access_denied: the user declined or cancelled
    "provider",  # the provider answered another error, or no code
    "state",  # the state is missing, expired, tampered with or another browser's
    "code",  # the provider's code or ID token did not hold up
    "disabled",  # the provider is not enabled
    "user",  # corral refuses the user (disabled, being deleted, kept out by the access mode)
    "unavailable",  # the provider cannot be reached
    "throttled",  # too many refused codes
    "failed",  # anything else
})  # fmt: skip


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


def return_to_of(key: bytes, sealed: str) -> str:
    """Where a sign-in sealed under `key` was to return, at any age: an attempt that expired
    still began in that browser, which is owed an answer its page can show. "" otherwise."""
    if not sealed or len(sealed) > MAX_SEALED or not sealed.isascii():
        return ""
    try:
        fields = json.loads(Fernet(key).decrypt(sealed))
        return_to = fields.get("return_to", "") if isinstance(fields, dict) else ""
    except (InvalidToken, ValueError):
        return ""
    return return_to if isinstance(return_to, str) and valid_return_to(return_to) else ""


def sign_in_page(return_to: str, reason: str) -> str:
    """The console's sign-in page telling why a sign-in begun at `return_to` did not complete:
    `/` with the reason, and the console page it began on (its fragment), so signing in
    afterwards still lands there."""
    _, hashed, fragment = return_to.partition("#")
    page = f"#{fragment}" if hashed and fragment.startswith("/") else ""
    return f"/?signInError={reason}{page}"
