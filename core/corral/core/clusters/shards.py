"""Which operator replica runs which clusters (docs/design/operator-sharding.md): a cluster
belongs to a fixed shard, a shard's owner among the live replicas is chosen by rendezvous
hashing, and a replica's next step for each shard follows from the Leases it reads.

Rendezvous hashing (highest random weight) gives every replica the same owners from the same
members with no coordination, and moves as little as can be: a member joining takes only the
shards it now wins, a member leaving gives away only its own.

A replica is a member while its own Lease is renewed; a shard's Lease names the member that
runs it, and stands while that member does. Only the member Leases are renewed: one write per
replica every RENEW_SECONDS, however many shards.
"""

from __future__ import annotations

import datetime
import enum
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from corral.core.times import parse_time

DEFAULT_SHARDS = 64
MAX_SHARDS = 1024
# A member's Lease stands this long unrenewed; it is renewed every RENEW_SECONDS, and a member
# that could not renew it for RENEW_DEADLINE stops its clusters, before any other replica may
# see it gone. A dead replica's shards are taken within LEASE_SECONDS + RENEW_SECONDS (the
# survivors' next tick): 12 s, under the 15 s a cluster may go unmanaged.
LEASE_SECONDS = 10
RENEW_SECONDS = 2.0
RENEW_DEADLINE = 7.0


def _weight(*parts: str) -> int:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def shard_of(cluster: str, shards: int = DEFAULT_SHARDS) -> int:
    """The shard a cluster belongs to, for as long as the number of shards stays."""
    if shards < 1:
        raise ValueError("at least one shard")
    return _weight(cluster) % shards


def owner(shard: int, members: Iterable[str]) -> str | None:
    """The member that should run the shard; None without members. Ties (never in practice)
    go to the smaller name, so every replica still agrees."""
    return max(members, key=lambda m: (_weight(m, str(shard)), _reversed(m)), default=None)


def _reversed(name: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in name)


def assignment(members: Iterable[str], shards: int = DEFAULT_SHARDS) -> dict[str, set[int]]:
    """Each member's shards."""
    found: dict[str, set[int]] = {m: set() for m in members}
    for shard in range(shards):
        chosen = owner(shard, found)
        if chosen is not None:
            found[chosen].add(shard)
    return found


@dataclass(frozen=True)
class Lease:
    """What is read of a coordination.k8s.io Lease: who holds it, and until when."""

    holder: str
    renewed: datetime.datetime | None
    duration: datetime.timedelta

    @classmethod
    def of(cls, obj: Mapping[str, object]) -> Lease:
        spec = obj.get("spec") or {}
        assert isinstance(spec, Mapping)
        renew = spec.get("renewTime") or spec.get("acquireTime")
        return cls(
            str(spec.get("holderIdentity") or ""),
            parse_time(renew) if isinstance(renew, str) else None,
            datetime.timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0)),
        )

    def held(self, now: datetime.datetime) -> bool:
        """Whether someone holds it and has renewed it in time."""
        return bool(self.holder) and self.renewed is not None and now < self.renewed + self.duration


def live(members: Iterable[Lease], now: datetime.datetime) -> set[str]:
    """The members whose own Lease is current, by identity."""
    return {lease.holder for lease in members if lease.held(now)}


def first_expiry(members: Iterable[Lease], now: datetime.datetime) -> datetime.timedelta | None:
    """How long until the first current member Lease expires: then the member it names is gone,
    and its shards are free to take at once rather than at the next tick."""
    ends = [lease.renewed + lease.duration for lease in members
            if lease.held(now) and lease.renewed is not None]  # fmt: skip
    return min(ends) - now if ends else None


class Step(enum.Enum):
    RUN = "run"  # mine and held by me: renew it, run its clusters
    TAKE = "take"  # mine and free or expired: take it, then run its clusters
    WAIT = "wait"  # mine, but another live replica still holds it: it will let go
    RELEASE = "release"  # held by me, no longer mine: stop its clusters, then let go
    NONE = "none"  # neither mine nor held by me


def decide(
    me: str,
    members: Iterable[str],
    holders: Mapping[int, str],
    shards: int = DEFAULT_SHARDS,
) -> dict[int, Step]:
    """This replica's step for every shard, given the live members (itself among them) and
    the holder each shard's Lease names (a shard without one, or whose holder is not a live
    member, is free)."""
    everyone = set(members) | {me}
    steps: dict[int, Step] = {}
    for shard in range(shards):
        holder = holders.get(shard, "")
        held_by_me = holder == me
        held_by_other = holder in everyone and not held_by_me
        if owner(shard, everyone) == me:
            steps[shard] = Step.RUN if held_by_me else Step.WAIT if held_by_other else Step.TAKE
        else:
            steps[shard] = Step.RELEASE if held_by_me else Step.NONE
    return steps
