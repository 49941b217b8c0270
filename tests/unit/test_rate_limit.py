"""The rate limit across replicas: replicas sharing one record of each user's window never
serve more than the limit together, reserve rarely, and count alone when the record is out of
reach. The record's conditional writes against a real kube-apiserver are in
tests/e2e/test_replicas.py."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.apiserver.auth.ratelimit import Grant, RateLimiter, reservation, window_of

T0 = 6000.0  # the start of a window (minute 100)


class MemoryLedger:
    """The shared record in memory, with the semantics of `auth.ledger.KubeLedger`: each
    reservation is atomic, and a record of a later window than the caller's is counted in."""

    def __init__(self, delay: float = 0) -> None:
        self.records: dict[str, tuple[int, int]] = {}
        self.reservations = 0
        self.delay = delay

    async def reserve(self, user: str, window: int, limit: int, returned: int = 0) -> Grant:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.reservations += 1
        stored, used = self.records.get(user, (window, 0))
        if stored < window:
            stored, used = window, 0
        elif stored == window:
            used = max(0, used - returned)
        granted = reservation(limit, used)
        self.records[user] = (stored, used + granted)
        return Grant(stored, granted, used + granted)

    def prune(self, window: int) -> None:
        pass


class BrokenLedger:
    async def reserve(self, user: str, window: int, limit: int, returned: int = 0) -> Grant:
        raise ConnectionError("the management cluster does not answer")

    def prune(self, window: int) -> None:
        pass


async def served(limiter: RateLimiter, count: int, limit: int, now: float = T0) -> int:
    return sum([(await limiter.hit("u-1", limit, now)).allowed for _ in range(count)])


def test_reservations_are_a_tenth_at_most_a_quarter_of_what_is_left_at_least_one() -> None:
    assert reservation(100, 0) == 10
    assert reservation(100, 70) == 7
    assert reservation(100, 97) == 1
    assert reservation(100, 100) == 0 == reservation(100, 150)
    assert reservation(5, 0) == 1
    assert reservation(1_000_000, 0) == 100_000


@pytest.mark.parametrize("limit", [1, 3, 5, 37, 100, 1000])
async def test_one_replica_serves_exactly_the_limit(limit: int) -> None:
    assert await served(RateLimiter(MemoryLedger()), limit * 2, limit) == limit


@pytest.mark.parametrize("replicas", [2, 3])
@pytest.mark.parametrize("limit", [1, 5, 100])
async def test_replicas_together_serve_exactly_the_limit(replicas: int, limit: int) -> None:
    ledger = MemoryLedger()
    limiters = [RateLimiter(ledger) for _ in range(replicas)]
    answers = [(await limiters[i % replicas].hit("u-1", limit, T0)).allowed
               for i in range(limit * 3)]  # fmt: skip
    assert sum(answers) == limit


async def test_a_client_on_one_replica_loses_at_most_what_the_others_hold() -> None:
    ledger = MemoryLedger()
    first, second = RateLimiter(ledger), RateLimiter(ledger)
    assert (await second.hit("u-1", 100, T0)).allowed  # reserves 10, uses 1
    alone = await served(first, 200, 100)
    assert 100 - math.ceil(100 / 10) <= alone <= 99


async def test_a_light_user_costs_one_reservation_a_minute() -> None:
    ledger = MemoryLedger()
    limiter = RateLimiter(ledger)
    for second in range(0, 60, 10):
        assert (await limiter.hit("u-1", 100, T0 + second)).allowed
    assert ledger.reservations == 1
    assert (await limiter.hit("u-1", 100, T0 + 60)).allowed  # the next minute
    assert ledger.reservations == 2


async def test_a_user_at_the_limit_costs_a_fraction_of_a_write_per_request() -> None:
    ledger = MemoryLedger()
    assert await served(RateLimiter(ledger), 150, 100) == 100
    assert ledger.reservations <= 25


async def test_concurrent_requests_wait_for_one_reservation() -> None:
    ledger = MemoryLedger(delay=0.01)
    limiter = RateLimiter(ledger)
    answers = await asyncio.gather(*(limiter.hit("u-1", 100, T0) for _ in range(10)))
    assert all(a.allowed for a in answers)
    assert ledger.reservations == 1
    many = await asyncio.gather(*(limiter.hit("u-1", 100, T0) for _ in range(200)))
    assert sum(a.allowed for a in many) == 90


async def test_headers_count_down_and_reset_with_the_minute() -> None:
    limiter = RateLimiter(MemoryLedger())
    first = await limiter.hit("u-1", 5, T0 + 15.5)
    assert first.headers == {
        "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": "45",
    }  # fmt: skip
    remaining = [(await limiter.hit("u-1", 5, T0 + 16)).remaining for _ in range(5)]
    assert remaining == [3, 2, 1, 0, 0]


async def test_unlimited_the_reset_counts_down_each_second_to_the_minute() -> None:
    limiter = RateLimiter(MemoryLedger())
    resets = [(await limiter.hit("u-1", 0, T0 + t)).headers["X-RateLimit-Reset"]
              for t in (15.0, 15.2, 15.99, 16.0, 59.5, 60.0, 60.7)]  # fmt: skip
    assert resets == ["45", "45", "45", "44", "1", "60", "60"]
    assert (await limiter.hit("u-2", -1, T0 + 15.5)).headers == {
        "X-RateLimit-Limit": "0", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "45",
    }  # fmt: skip


async def test_a_replica_whose_clock_lags_counts_in_the_records_window() -> None:
    ledger = MemoryLedger()
    ahead, behind = RateLimiter(ledger), RateLimiter(ledger)
    assert await served(ahead, 3, 3, now=T0 + 0.2) == 3  # minute 100 has begun here
    # 0.5 s behind, still in minute 99: the record's minute 100 is counted in, not reset.
    assert await served(behind, 3, 3, now=T0 - 0.3) == 0


async def test_out_of_reach_the_limit_holds_per_replica_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limiter = RateLimiter(BrokenLedger())
    with caplog.at_level(logging.WARNING):
        assert await served(limiter, 10, 5) == 5
        assert await served(limiter, 10, 5, now=T0 + 60) == 5  # a new window, alone again
    assert caplog.text.count("out of reach") == 1


async def test_a_changed_limit_applies_at_once() -> None:
    limiter = RateLimiter(MemoryLedger())
    assert await served(limiter, 5, 1000) == 5  # 100 reserved, 95 of them unused
    # Lowered: the 95 unused are given back, and the 5 served count.
    assert await served(limiter, 100, 80) == 75
    assert await served(limiter, 200, 200) == 120  # raised: the user goes on at once


async def test_a_raised_setting_changed_twice_leaves_the_limit_to_what_was_served() -> None:
    # The Helm e2e's sequence on two pods of two workers each: the limit raised to 100,000,
    # then set to 50,000 and 60,000 while the admin's requests go round the four replicas,
    # and a replica that sees 60,000 last still refuses on 50,000. Reservations abandoned at
    # each change once filled the record: a hundred requests were refused at "50,000".
    ledger = MemoryLedger()
    replicas = [RateLimiter(ledger) for _ in range(4)]
    answers = [await replicas[i % 4].hit("u-1", 100_000, T0) for i in range(40)]
    answers += [await replicas[i % 3].hit("u-1", 50_000, T0) for i in range(30)]
    answers += [await replicas[i % 3].hit("u-1", 60_000, T0) for i in range(30)]
    answers.append(await replicas[3].hit("u-1", 50_000, T0))
    assert all(a.allowed for a in answers)
    # What the record holds taken is what was served and what the replicas hold reserved.
    held = sum(r._windows["u-1"].left for r in replicas)
    assert ledger.records["u-1"] == (window_of(T0), len(answers) + held)


async def test_a_replica_that_sees_the_limit_change_gives_back_what_it_holds_at_once() -> None:
    ledger = MemoryLedger()
    idle, busy = RateLimiter(ledger), RateLimiter(ledger)
    assert (await idle.hit("u-1", 100_000, T0)).allowed  # 10,000 reserved, 9,999 unused
    await idle.settle(100_000, T0)
    assert ledger.records["u-1"] == (window_of(T0), 10_000)  # unchanged: nothing written
    await idle.settle(1_000, T0)
    assert ledger.records["u-1"] == (window_of(T0), 1)
    # The other replica's client gets all of the lowered limit but the one request served.
    assert await served(busy, 2_000, 1_000) == 999


async def test_a_replica_that_stops_gives_back_all_it_holds() -> None:
    ledger = MemoryLedger()
    stopping, staying = RateLimiter(ledger), RateLimiter(ledger)
    assert await served(stopping, 3, 100) == 3  # 10 reserved, 7 unused
    await stopping.release(T0)
    assert ledger.records["u-1"] == (window_of(T0), 3)
    assert await served(staying, 200, 100) == 97


async def test_reservations_of_a_finished_window_are_not_given_back_to_the_next() -> None:
    ledger = MemoryLedger()
    early, late = RateLimiter(ledger), RateLimiter(ledger)
    assert (await early.hit("u-1", 100, T0 + 59)).allowed  # 10 reserved in minute 100
    assert (await late.hit("u-1", 100, T0 + 60)).allowed  # the record moves to minute 101
    await early.settle(50, T0 + 59.5)  # early's clock has not reached minute 101
    assert ledger.records["u-1"] == (window_of(T0 + 60), 10)


def test_pruning_forgets_finished_windows() -> None:
    limiter = RateLimiter(MemoryLedger())
    asyncio.run(limiter.hit("u-1", 5, T0))
    limiter.prune(T0 + 60)
    assert not limiter._windows


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=50),
    requests=st.lists(
        st.tuples(st.integers(min_value=0, max_value=2), st.floats(min_value=0, max_value=179)),
        max_size=300,
    ),
)
def test_no_window_ever_serves_more_than_the_limit(
    limit: int, requests: list[tuple[int, float]]
) -> None:
    async def run() -> dict[int, int]:
        ledger = MemoryLedger()
        limiters = [RateLimiter(ledger) for _ in range(3)]
        per_window: dict[int, int] = {}
        for replica, offset in sorted(requests, key=lambda r: r[1]):
            now = T0 + offset
            if (await limiters[replica].hit("u-1", limit, now)).allowed:
                per_window[window_of(now)] = per_window.get(window_of(now), 0) + 1
        return per_window

    assert all(count <= limit for count in asyncio.run(run()).values())


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2),  # the replica
            st.sampled_from([0, 3, 20, 100]),  # the limit it sees
            st.booleans(),  # a request (or the replica settling for the limit)
        ),
        max_size=200,
    )
)
def test_the_record_counts_what_was_served_and_what_is_held_whatever_the_changes(
    steps: list[tuple[int, int, bool]],
) -> None:
    async def run() -> None:
        ledger = MemoryLedger()
        limiters = [RateLimiter(ledger) for _ in range(3)]
        served_counted = 0
        for replica, limit, request in steps:
            if request:
                decision = await limiters[replica].hit("u-1", limit, T0)
                served_counted += decision.allowed and limit > 0
            else:
                await limiters[replica].settle(limit, T0)
            states = [w for r in limiters if (w := r._windows.get("u-1")) is not None]
            held = sum(w.left + w.returning for w in states)
            _, used = ledger.records.get("u-1", (window_of(T0), 0))
            assert used == served_counted + held

    asyncio.run(run())
