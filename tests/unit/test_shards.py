"""Which replica runs which clusters: shards are stable, each has one owner, a member joining
or leaving moves only what it must, and each replica's step follows from the Leases."""

from __future__ import annotations

import datetime

import pytest

from corral.core.clusters import shards
from corral.core.clusters.shards import Lease, Step

NOW = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.UTC)
TEN = datetime.timedelta(seconds=10)
MEMBERS = [f"corral-operator-{i}" for i in range(3)]


def test_a_cluster_keeps_its_shard_and_clusters_spread_over_all() -> None:
    assert shards.shard_of("c-abcde") == shards.shard_of("c-abcde")
    seen = {shards.shard_of(f"c-{i:05d}") for i in range(2000)}
    assert seen == set(range(shards.DEFAULT_SHARDS))
    with pytest.raises(ValueError, match="at least one shard"):
        shards.shard_of("c-abcde", 0)


def test_every_shard_has_exactly_one_owner_whatever_the_order() -> None:
    owned = shards.assignment(MEMBERS)
    assert sorted(s for found in owned.values() for s in found) == list(range(64))
    assert shards.assignment(reversed(MEMBERS)) == owned
    assert all(len(found) > 64 / 3 / 2 for found in owned.values())  # none starves
    assert shards.owner(5, []) is None


def test_a_member_joining_takes_only_what_it_now_wins() -> None:
    before = shards.assignment(MEMBERS)
    after = shards.assignment([*MEMBERS, "corral-operator-3"])
    for member in MEMBERS:
        assert after[member] <= before[member]  # nobody gains but the newcomer
    moved = 64 - sum(len(after[m]) for m in MEMBERS)
    assert moved == len(after["corral-operator-3"])
    assert 64 / 4 / 2 < moved < 64 / 4 * 2


def test_a_member_leaving_gives_away_only_its_own() -> None:
    before = shards.assignment(MEMBERS)
    after = shards.assignment(MEMBERS[:2])
    for member in MEMBERS[:2]:
        assert after[member] >= before[member]
        assert after[member] - before[member] <= before[MEMBERS[2]]
    assert after[MEMBERS[0]] | after[MEMBERS[1]] == set(range(64))


def lease(holder: str, seconds_ago: float) -> Lease:
    return Lease(holder, NOW - datetime.timedelta(seconds=seconds_ago), TEN)


def test_a_lease_is_held_until_it_expires_and_read_from_its_object() -> None:
    assert lease("a", 9.9).held(NOW)
    assert not lease("a", 10).held(NOW)
    assert not lease("", 1).held(NOW)
    read = Lease.of({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 10,
                              "renewTime": "2026-11-28T11:59:55.123456Z"}})  # fmt: skip
    assert read.held(NOW) and read.holder == "a"
    assert not Lease.of({"spec": {}}).held(NOW)
    members = {"a": lease("a", 1), "b": lease("b", 11), "c": lease("x", 1)}
    assert shards.live(members, NOW) == {"a"}


def test_each_replica_takes_keeps_waits_for_and_releases_its_shards() -> None:
    me, other = MEMBERS[0], MEMBERS[1]
    owners = {s: shards.owner(s, MEMBERS) for s in range(64)}
    mine = [s for s, o in owners.items() if o == me]
    theirs = [s for s, o in owners.items() if o == other]
    leases = {
        mine[0]: lease(me, 1),  # held by me: run
        mine[1]: lease(other, 1),  # still held by its old owner: wait
        mine[2]: lease(other, 11),  # its holder is gone: take
        theirs[0]: lease(me, 1),  # no longer mine: release
        theirs[1]: lease(other, 1),
    }
    steps = shards.decide(me, MEMBERS, leases, NOW)
    assert steps[mine[0]] is Step.RUN
    assert steps[mine[1]] is Step.WAIT
    assert steps[mine[2]] is Step.TAKE
    assert steps[mine[3]] is Step.TAKE  # no Lease yet
    assert steps[theirs[0]] is Step.RELEASE
    assert steps[theirs[1]] is Step.NONE
    # The other replica, reading the same Leases, lets go of what is now mine.
    assert shards.decide(other, MEMBERS, leases, NOW)[mine[1]] is Step.RELEASE


def test_when_a_replica_dies_the_survivors_take_all_its_shards() -> None:
    dead = MEMBERS[2]
    leases = {s: lease(o, 1) for s in range(64) if (o := shards.owner(s, MEMBERS)) == dead}
    later = NOW + TEN  # its Leases have expired, and it is no longer a live member
    survivors = MEMBERS[:2]
    taken = {
        s
        for member in survivors
        for s, step in shards.decide(member, survivors, leases, later).items()
        if step is Step.TAKE and s in leases
    }
    assert taken == set(leases)
    # Each is taken by one survivor only.
    takers = [
        [m for m in survivors if shards.decide(m, survivors, leases, later)[s] is Step.TAKE]
        for s in leases
    ]
    assert all(len(t) == 1 for t in takers)
