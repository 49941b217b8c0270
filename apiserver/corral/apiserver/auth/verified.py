"""Tokens whose key this process has verified, so that a token's next request costs a
dictionary lookup and one keyed digest instead of parsing its object and hashing its key.

An entry holds the token's record as parsed from one resourceVersion of its object, and
proves the key that was verified against it. It answers only while the token's object is
still that version: editing, regenerating or deleting the token (a deleted token has no
version) makes the next request parse and verify afresh.

An entry also holds the token's `Standing`: what its holder was last judged to be (allowed
in, an administrator or not, in which groups) and what that judgement rests on besides the
token: the versions of the caches of users, their bindings and attributes, the settings and
the providers (`stamp`), and the clock (`until`: the token's expiry, or the moment it would
go idle had it not been used since). A request finds it good only while the stamp is the one
it was judged under and the clock is short of `until`, so disabling a user or a provider, or
changing a setting, takes effect at the next request as before; anything else is judged
again in full.

What is kept of the key is a BLAKE2b digest keyed with a secret drawn when the process
starts: it proves a later presentation is the same key (compared in constant time), cannot be
turned back into the key, and means nothing outside this process. It is the spec's "cache
index on the hashed key, used first" (spec 5.2): a token found here is not looked up again
by the index digest of its key.

Entries are bounded (least recently used goes first), so presenting many tokens grows
memory no further than `MAX_ENTRIES` records.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

from corral.core.auth.tokens import TokenRecord

MAX_ENTRIES = 10_000


class Standing(NamedTuple):
    """A token's holder as judged, good while `stamp` stands and the clock is before `until`
    (None: no instant ends it)."""

    stamp: Hashable
    until: datetime.datetime | None
    is_admin: bool
    groups: tuple[str, ...]

    def holds(self, stamp: Hashable, now: datetime.datetime) -> bool:
        return stamp == self.stamp and (self.until is None or now < self.until)


@dataclass
class _Entry:
    version: str
    proof: bytes
    record: TokenRecord
    standing: Standing | None = None


class VerifiedTokens:
    def __init__(self, size: int = MAX_ENTRIES) -> None:
        self._size = size
        self._secret = secrets.token_bytes(32)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def get(self, name: str, key: str, version: str | None) -> TokenRecord | None:
        """The record of token `name` if `key` was verified against `version` of its object,
        which is still current; None when it must be verified (again)."""
        entry = self._entries.get(name)
        if entry is None:
            return None
        if version is None or entry.version != version:
            del self._entries[name]
            return None
        if not hmac.compare_digest(entry.proof, self._proof(key)):
            return None
        self._entries.move_to_end(name)
        return entry.record

    def standing(self, name: str) -> Standing | None:
        """How the holder of token `name` was last judged, for a token `get` has just
        answered for; None when not yet."""
        entry = self._entries.get(name)
        return None if entry is None else entry.standing

    def judged(self, name: str, standing: Standing) -> None:
        """Keep how token `name`'s holder was judged, for a token `get` or `put` has just
        remembered."""
        entry = self._entries.get(name)
        if entry is not None:
            entry.standing = standing

    def put(self, key: str, version: str | None, record: TokenRecord) -> None:
        """Remember that `key` is the key of `record`, parsed from `version` of its object.
        Objects without a version (never stored) are not remembered."""
        if not version:
            return
        self._entries[record.name] = _Entry(version, self._proof(key), record)
        self._entries.move_to_end(record.name)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def _proof(self, key: str) -> bytes:
        return hashlib.blake2b(key.encode(), key=self._secret, digest_size=32).digest()
