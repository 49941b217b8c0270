"""Token key hashing.

Stored forms (spec.token of a Token):

| form | algorithm |
|---|---|
| `$3:<salt>:<hash>` | SHA3-512 over salt + key, 32-byte random salt (all new tokens) |
| `$2:<salt>:<hash>` | SHA-256 over salt + key (legacy, still verified) |
| `$1:<salt>:<hash>` | scrypt, N=2^15, r=8, p=1, 64-byte key (legacy, still verified) |
| anything without `$` | the key itself, stored before hashing was enabled |

Salts and hashes are unpadded standard base64. Rancher's own long forms
(`$3:1:<salt>:<hash>` and `$1:<hex salt>:<N exp>:<r>:<p>:<hash>`) verify too, so tokens
migrated from it keep working. Every comparison is constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets

log = logging.getLogger(__name__)

SALT_BYTES = 32
SCRYPT_N, SCRYPT_R, SCRYPT_P, SCRYPT_DKLEN = 2**15, 8, 1, 64


class HashFormatError(ValueError):
    """A stored value claims to be a hash but cannot be read as one."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error as exc:
        raise HashFormatError("bad base64") from exc


def new_key() -> str:
    """32 random bytes, URL-safe base64 without padding: never contains `:`."""
    return secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    salt = secrets.token_bytes(SALT_BYTES)
    return f"$3:{_b64(salt)}:{_b64(hashlib.sha3_512(salt + key.encode()).digest())}"


def index_digest(key: str) -> str:
    """What the key index (spec 2.1) finds a token by: SHA3-256 of the key, in lower-case
    base32 without padding (52 letters and digits, a valid label value).

    Unsalted, so that a presented key finds its token without knowing the token first. That
    gives nothing away: a key is 32 random bytes, so no table of digests can be built, and the
    digest is as readable as the salted hash next to it.
    """
    digest = hashlib.sha3_256(key.encode()).digest()
    return base64.b32encode(digest).decode().rstrip("=").lower()


def is_hashed(stored: str) -> bool:
    return stored.startswith("$")


def verify(stored: str, key: str) -> bool:
    """Whether `key` matches the stored value, hashed in any supported form or not at all."""
    if not is_hashed(stored):
        return hmac.compare_digest(stored.encode(), key.encode())
    try:
        expected, actual = _digests(stored, key.encode())
    except HashFormatError as exc:
        # The key must never reach the log; the stored value is a hash, so it may not either.
        log.warning("VerifyHash failed: %s", exc)
        return False
    if not hmac.compare_digest(expected, actual):
        log.info("VerifyHash failed: key does not match")
        return False
    return True


def _digests(stored: str, key: bytes) -> tuple[bytes, bytes]:
    version, _, rest = stored[1:].partition(":")
    parts = rest.split(":")
    if version == "3":
        if len(parts) == 3 and parts[0] == "1":  # Rancher's form names a SHA3 variant first
            parts = parts[1:]
        salt, expected = _two(parts)
        return expected, hashlib.sha3_512(salt + key).digest()
    if version == "2":
        salt, expected = _two(parts)
        return expected, hashlib.sha256(salt + key).digest()
    if version == "1":
        if len(parts) == 5:  # Rancher's form: hex salt, log2 N, r, p, hash
            try:
                salt = bytes.fromhex(parts[0])
                n, r, p = 2 ** int(parts[1]), int(parts[2]), int(parts[3])
            except ValueError as exc:
                raise HashFormatError("bad scrypt parameters") from exc
            expected = _unb64(parts[4])
        else:
            (salt, expected), n, r, p = _two(parts), SCRYPT_N, SCRYPT_R, SCRYPT_P
        if not expected:
            raise HashFormatError("empty hash")
        actual = hashlib.scrypt(key, salt=salt, n=n, r=r, p=p, dklen=len(expected),
                                maxmem=256 * 1024 * 1024)  # fmt: skip
        return expected, actual
    raise HashFormatError(f"unknown hash version {version!r}")


def _two(parts: list[str]) -> tuple[bytes, bytes]:
    if len(parts) != 2:
        raise HashFormatError("expected <salt>:<hash>")
    salt, digest = _unb64(parts[0]), _unb64(parts[1])
    if not digest:
        raise HashFormatError("empty hash")
    return salt, digest


def legacy_sha256(key: str) -> str:
    """A `$2` value, as older releases stored it (for migrations and tests)."""
    salt = secrets.token_bytes(SALT_BYTES)
    return f"$2:{_b64(salt)}:{_b64(hashlib.sha256(salt + key.encode()).digest())}"


def legacy_scrypt(key: str) -> str:
    """A `$1` value, as older releases stored it (for migrations and tests)."""
    salt = secrets.token_bytes(SALT_BYTES)
    digest = hashlib.scrypt(key.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                            dklen=SCRYPT_DKLEN, maxmem=256 * 1024 * 1024)  # fmt: skip
    return f"$1:{_b64(salt)}:{_b64(digest)}"
