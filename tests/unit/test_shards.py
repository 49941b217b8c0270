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


def test_a_member_is_live_until_its_lease_expires_as_read_from_its_object() -> None:
    assert lease("a", 9.9).held(NOW)
    assert not lease("a", 10).held(NOW)
    assert not lease("", 1).held(NOW)
    read = Lease.of({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 10,
                              "renewTime": "2026-11-28T11:59:55.123456Z"}})  # fmt: skip
    assert read.held(NOW) and read.holder == "a"
    assert not Lease.of({"spec": {}}).held(NOW)
    assert shards.live([lease("a", 1), lease("b", 11), lease("", 1)], NOW) == {"a"}


def test_a_replica_looks_again_when_the_first_member_lease_expires() -> None:
    members = [lease("a", 1), lease("b", 7.5), lease("c", 11)]
    assert shards.first_expiry(members, NOW) == datetime.timedelta(seconds=2.5)
    assert shards.first_expiry([lease("c", 11), lease("", 1)], NOW) is None


def test_the_lease_numbers_hand_a_dead_replicas_clusters_over_within_15_seconds() -> None:
    # A member stops its clusters before anyone may see its Lease expire, and the survivors
    # take its shards at their next tick after it does.
    assert shards.RENEW_SECONDS < shards.RENEW_DEADLINE < shards.LEASE_SECONDS
    assert shards.RENEW_DEADLINE + shards.RENEW_SECONDS <= shards.LEASE_SECONDS
    assert shards.LEASE_SECONDS + shards.RENEW_SECONDS < 15


def test_each_replica_takes_keeps_waits_for_and_releases_its_shards() -> None:
    me, other = MEMBERS[0], MEMBERS[1]
    owners = {s: shards.owner(s, MEMBERS) for s in range(64)}
    mine = [s for s, o in owners.items() if o == me]
    theirs = [s for s, o in owners.items() if o == other]
    holders = {
        mine[0]: me,  # held by me: run
        mine[1]: other,  # still held by its old owner: wait
        mine[2]: "corral-operator-gone",  # its holder is no longer a member: take
        theirs[0]: me,  # no longer mine: release
        theirs[1]: other,
        theirs[2]: "corral-operator-gone",  # free, but the other's to take
    }
    steps = shards.decide(me, MEMBERS, holders)
    assert steps[mine[0]] is Step.RUN
    assert steps[mine[1]] is Step.WAIT
    assert steps[mine[2]] is Step.TAKE
    assert steps[mine[3]] is Step.TAKE  # no Lease yet
    assert steps[theirs[0]] is Step.RELEASE
    assert steps[theirs[1]] is Step.NONE
    assert steps[theirs[2]] is Step.NONE
    # The other replica, reading the same Leases, lets go of what is now mine.
    assert shards.decide(other, MEMBERS, holders)[mine[1]] is Step.RELEASE
    assert shards.decide(other, MEMBERS, holders)[theirs[2]] is Step.TAKE


def test_a_replica_alone_runs_every_shard() -> None:
    steps = shards.decide(MEMBERS[0], [], {})
    assert set(steps.values()) == {Step.TAKE}
    assert set(shards.decide(MEMBERS[0], [], dict.fromkeys(range(64), MEMBERS[0])).values()) == {
        Step.RUN
    }


def test_when_a_replica_dies_the_survivors_take_all_its_shards_once() -> None:
    dead = MEMBERS[2]
    holders = {s: o for s in range(64) if (o := shards.owner(s, MEMBERS)) is not None}
    survivors = MEMBERS[:2]  # its Lease expired: it is no longer a live member
    takers = {
        s: [m for m in survivors if shards.decide(m, survivors, holders)[s] is Step.TAKE]
        for s in range(64)
    }
    assert {s for s, found in takers.items() if found} == {
        s for s, o in holders.items() if o == dead
    }
    assert all(len(found) <= 1 for found in takers.values())
    # What the survivors held stays where it was.
    for member in survivors:
        steps = shards.decide(member, survivors, holders)
        assert {s for s, step in steps.items() if step is Step.RUN} == {
            s for s, o in holders.items() if o == member
        }


def test_a_member_joining_is_handed_its_shards_by_their_holders() -> None:
    holders = {s: o for s in range(64) if (o := shards.owner(s, MEMBERS)) is not None}
    newcomer = "corral-operator-3"
    everyone = [*MEMBERS, newcomer]
    waiting = {s for s, step in shards.decide(newcomer, everyone, holders).items()
               if step is Step.WAIT}  # fmt: skip
    released = {
        s
        for m in MEMBERS
        for s, step in shards.decide(m, everyone, holders).items()
        if step is Step.RELEASE
    }
    assert waiting == released == shards.assignment(everyone)[newcomer]
    after = {s: (newcomer if s in released else o) for s, o in holders.items()}
    assert set(shards.decide(newcomer, everyone, after).values()) <= {Step.RUN, Step.NONE}
