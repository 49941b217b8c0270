"""Local users' passwords: Argon2id, slow on purpose and only ever run at login."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from corral.core.errors import Invalid

_hasher = PasswordHasher()  # the library's defaults follow RFC 9106's recommendation
# Verified against when the user does not exist, so that the time taken does not reveal it.
_DECOY = _hasher.hash("corral-decoy-password")

MIN_LENGTH = 12


class PasswordPolicyError(Invalid):
    def __init__(self, message: str) -> None:
        super().__init__(message, "password", "InvalidBodyContent")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(stored: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored or _DECOY, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


def check_policy(username: str, password: str) -> None:
    if len(password) < MIN_LENGTH:
        raise PasswordPolicyError(f"password must be at least {MIN_LENGTH} characters")
    if password == username:
        raise PasswordPolicyError("password must not equal the username")
