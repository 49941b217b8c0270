"""Token values, their stored records, and the decision whether a presented value authenticates.

Everything here is pure: the caller supplies the stored token, the user's state, the settings
in force and the clock, and gets back who the caller is or why not (spec 5.2 and 7).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core import times
from corral.core.api import names
from corral.core.auth import hashing, ttl

# A token name is a Kubernetes object name (DNS-1123 subdomain).
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
# A key is visible ASCII other than ":". Header bytes that are not ASCII (aiohttp hands them
# on as lone surrogates) could never match a stored key, and could not even be hashed.
_KEY = re.compile(r"[!-9;-~]+")

MSG_INVALID = "invalid auth token value"
MSG_EXPIRED = "must authenticate, expired"
MSG_NOT_FOUND = "token not found"
MSG_MISSING = "must authenticate"


@dataclass(frozen=True)
class TokenRecord:
    """The fields of a Token custom resource that authentication and the API need."""

    name: str
    user_id: str
    stored: str
    ttl_ms: int
    created: datetime.datetime
    kind: str
    is_derived: bool
    cluster_name: str
    enabled: bool
    description: str
    auth_provider: str
    last_activity: datetime.datetime | None
    uid: str
    version: str  # the object's resourceVersion: a record's renderings are kept by it

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> TokenRecord:
        meta, spec = obj["metadata"], obj.get("spec", {})
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        activity = annotations.get(names.ANNOTATION_LAST_ACTIVITY)
        return cls(
            name=meta["name"],
            user_id=spec.get("userId", ""),
            stored=spec.get("token", ""),
            ttl_ms=int(spec.get("ttlMillis", 0)),
            created=times.parse_time(meta["creationTimestamp"]),
            kind=labels.get(names.LABEL_TOKEN_KIND, ""),
            is_derived=bool(spec.get("isDerived", False)),
            cluster_name=spec.get("clusterName", ""),
            enabled=spec.get("enabled", True) is not False,
            description=spec.get("description", ""),
            auth_provider=spec.get("authProvider", ""),
            last_activity=times.parse_time(activity) if activity else None,
            uid=meta.get("uid", ""),
            version=meta.get("resourceVersion", ""),
        )

    @property
    def is_session(self) -> bool:
        return self.kind == names.KIND_SESSION

    @property
    def is_system(self) -> bool:
        return is_system_name(self.name)

    def expires_at(self) -> datetime.datetime | None:
        """None when it never expires: a ttl of 0, or a system token whatever its ttl."""
        return None if self.is_system else ttl.expires_at(self.created, self.ttl_ms)

    def expired(self, now: datetime.datetime) -> bool:
        expiry = self.expires_at()
        return expiry is not None and now >= expiry


def is_system_name(name: str) -> bool:
    """Whether a token of this name is a system token: fixed names, never expiring, never
    deleted, listed or shown through the API."""
    return name in names.SYSTEM_TOKEN_NAMES


# A username that can stand in a kubeconfig token's name as it is: a DNS label without dots
# (the dot separates the cluster id), and not starting with `u-`, which user ids do.
_NAME_SAFE_USERNAME = re.compile(r"(?!u-)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def kubeconfig_token_name(username: str, user_id: str, cluster_id: str) -> str:
    """`kubeconfig-<username>.<cluster_id>` (spec 2.1).

    A username that cannot be part of an object name (capitals, `@`, spaces, longer than 63)
    is replaced by the user id. Usernames are unique and never start with `u-`, ids always do,
    so no two users get one name.
    """
    part = username if _NAME_SAFE_USERNAME.fullmatch(username) else user_id
    return f"{names.KUBECONFIG_TOKEN_PREFIX}{part}.{cluster_id}"


class AuthFailure(Exception):
    """Why a request does not authenticate: an HTTP status and the spec's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def split(value: str) -> tuple[str, str]:
    """`<name>:<key>` into its halves; anything else is an invalid token value (422)."""
    name, sep, key = value.partition(":")
    if not sep or not _NAME.fullmatch(name) or not _KEY.fullmatch(key):
        raise AuthFailure(422, MSG_INVALID)
    return name, key


@dataclass(frozen=True)
class Policy:
    """The settings in force that decide whether a token is still good."""

    idle_minutes: float


def check(
    record: TokenRecord | None,
    key: str,
    user_active: bool | None,
    last_activity: datetime.datetime | None,
    policy: Policy,
    now: datetime.datetime,
) -> TokenRecord:
    """The validation order of spec 5.2, after the value was split and the name looked up:
    the key, then expiry, then idleness, and only then the user (so an expired token of a
    disabled or deleted user is 410, as it would be of anyone).

    `user_active` is None when the user does not exist (or is being deleted), False when the
    user is disabled. `last_activity` is the latest use known to this process.
    """
    return standing(verified(record, key), user_active, last_activity, policy, now)


def verified(record: TokenRecord | None, key: str) -> TokenRecord:
    """The first half of `check`: the token exists and `key` is its key."""
    if record is None:
        raise AuthFailure(404, MSG_NOT_FOUND)
    if not hashing.verify(record.stored, key):
        raise AuthFailure(422, MSG_INVALID)
    return record


def good_until(
    record: TokenRecord, last_activity: datetime.datetime | None, policy: Policy
) -> datetime.datetime | None:
    """The first instant at which `standing` may answer otherwise on the clock alone: the
    token's expiry, or for a session the moment it goes idle unless used again after
    `last_activity`; None when neither can come."""
    ends = [record.expires_at()]
    if record.is_session and policy.idle_minutes > 0:
        last = last_activity or record.created
        ends.append(last + datetime.timedelta(minutes=policy.idle_minutes))
    return min((end for end in ends if end is not None), default=None)


def standing(
    record: TokenRecord,
    user_active: bool | None,
    last_activity: datetime.datetime | None,
    policy: Policy,
    now: datetime.datetime,
) -> TokenRecord:
    """The second half of `check`, for a token whose key is verified: what the clock, the
    settings and its user say of it now. A caller that remembers the answer must judge again
    at `good_until` and whenever the user or the settings change."""
    if record.expired(now):
        raise AuthFailure(410, MSG_EXPIRED)
    if record.is_session and ttl.is_idle(last_activity or record.created, policy.idle_minutes, now):
        raise AuthFailure(410, MSG_EXPIRED)
    if user_active is None:
        raise AuthFailure(404, MSG_NOT_FOUND)
    if not user_active or not record.enabled:
        raise AuthFailure(401, "must authenticate, disabled")
    return record
