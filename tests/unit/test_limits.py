from __future__ import annotations

import asyncio
import datetime

import pytest

from corral.apiserver.auth import activity
from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.ratelimit import RateLimiter
from corral.apiserver.auth.throttle import FORGET_AFTER, USER_FREE_FAILURES, LoginThrottle
from corral.operator.management.tokens import expired, expiry_status

from .test_rate_limit import MemoryLedger

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


async def test_rate_limit_counts_per_user_in_one_minute_windows() -> None:
    limiter = RateLimiter(MemoryLedger())
    decisions = [await limiter.hit("u1", 3, now=120.0) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    assert decisions[-1].reset_seconds == 60
    assert (await limiter.hit("u2", 3, now=120.0)).allowed
    assert (await limiter.hit("u1", 3, now=180.0)).allowed  # a new window
    assert (await limiter.hit("u1", 0, now=181.0)).allowed  # 0 disables


def test_login_throttle_doubles_and_a_success_clears_the_username_only() -> None:
    throttle = LoginThrottle()
    for _ in range(USER_FREE_FAILURES):
        assert throttle.retry_after("bob", "10.0.0.1", 0.0) == 0
        throttle.failed("bob", "10.0.0.1", 0.0)
    assert throttle.retry_after("bob", "10.0.0.1", 0.0) == 1.0
    throttle.failed("bob", "10.0.0.1", 0.0)
    assert throttle.retry_after("bob", "10.0.0.2", 0.5) == 1.5  # 2 s penalty, 0.5 s gone
    assert throttle.retry_after("alice", "10.0.0.1", 0.0) == 0  # address still has room
    throttle.succeeded("bob")
    assert throttle.retry_after("bob", "10.0.0.1", 0.0) == 0


def test_the_penalty_runs_from_when_a_slow_check_said_wrong() -> None:
    """A password check slower than the penalty (a loaded server) must not let the next guess
    straight through: the penalty starts once the wrong password is known."""
    throttle = LoginThrottle()
    for attempt in range(USER_FREE_FAILURES):
        began = attempt * 2.0
        assert throttle.reserve("bob", "10.0.0.1", began) == 0
        throttle.refused("bob", "10.0.0.1", began + 1.5)  # each check takes 1.5 s
    judged = (USER_FREE_FAILURES - 1) * 2.0 + 1.5
    assert throttle.retry_after("bob", "10.0.0.1", judged + 0.01) > 0


async def test_activity_is_written_once_then_at_most_once_per_interval() -> None:
    writes: list[tuple[str, datetime.datetime]] = []

    async def write(token: str, seen: datetime.datetime) -> None:
        writes.append((token, seen))

    tracker = ActivityTracker(write)
    tracker.touch("t", NOW)
    await tracker.flush(NOW, idle_minutes=0)
    for second in range(1, 50):
        tracker.touch("t", NOW + datetime.timedelta(seconds=second))
        await tracker.flush(NOW + datetime.timedelta(seconds=second), idle_minutes=0)
    assert len(writes) == 1  # the first use; the next may wait a minute
    await tracker.flush(NOW + datetime.timedelta(seconds=61), idle_minutes=0)
    assert writes[-1] == ("t", NOW + datetime.timedelta(seconds=49))
    # A short idle timeout shortens the interval to half of it.
    tracker.touch("t", NOW + datetime.timedelta(seconds=62))
    await tracker.flush(NOW + datetime.timedelta(seconds=62), idle_minutes=0.5)
    assert len(writes) == 2
    await tracker.flush(NOW + datetime.timedelta(seconds=76), idle_minutes=0.5)
    assert len(writes) == 3
    assert tracker.last_seen("t", NOW + datetime.timedelta(hours=1)) == NOW + datetime.timedelta(
        hours=1
    )


def test_operator_expiry_status_and_purge_selection() -> None:
    created = "2026-11-22T11:00:00Z"  # an hour before NOW

    def token(name: str, ttl_ms: int, kind: str = "") -> dict:
        labels = {"authn.management.svc.io/kind": kind} if kind else {}
        return {"metadata": {"name": name, "creationTimestamp": created, "labels": labels},
                "spec": {"ttlMillis": ttl_ms}}  # fmt: skip

    assert expiry_status(token("forever", 0), NOW) is None
    assert expiry_status(token("old", 60_000), NOW) == {
        "expiresAt": "2026-11-22T11:01:00Z", "expired": True,
    }  # fmt: skip
    assert expiry_status(token("young", 7_200_000), NOW) == {
        "expiresAt": "2026-11-22T13:00:00Z", "expired": False,
    }  # fmt: skip
    # A system token never expires, whatever its ttl; the label alone makes none.
    assert expiry_status(token("system-operator", 60_000, "system"), NOW) is None
    tokens = [token("old", 60_000), token("forever", 0), token("young", 7_200_000),
              token("system-operator", 60_000, "system"),
              token("labelled-system", 60_000, "system")]  # fmt: skip
    assert expired(tokens, NOW) == ["old", "labelled-system"]


def test_login_throttle_forgets_old_records_when_pruned() -> None:
    throttle = LoginThrottle()
    throttle.failed("someone", "10.0.0.1", now=0.0)
    throttle.failed("other", "10.0.0.2", now=1000.0)
    throttle.prune(now=1000.0 + FORGET_AFTER)
    assert len(throttle) == 2  # "other" and its address are not old enough yet
    throttle.prune(now=1001.0 + FORGET_AFTER)
    assert len(throttle) == 0


async def test_a_tick_looks_only_at_tokens_used_since_their_last_write() -> None:
    writes: list[str] = []

    async def write(token: str, seen: datetime.datetime) -> None:
        writes.append(token)

    tracker = ActivityTracker(write)
    for n in range(1000):
        tracker.touch(f"t-{n}", NOW)
    await tracker.flush(NOW, idle_minutes=0)
    assert len(writes) == 1000
    tracker.touch("t-7", NOW + datetime.timedelta(seconds=5))
    later = NOW + datetime.timedelta(minutes=2)
    assert tracker.due(later, idle_minutes=0) == [("t-7", NOW + datetime.timedelta(seconds=5))]


async def test_a_use_while_its_write_is_on_the_way_is_written_later() -> None:
    writes: list[datetime.datetime] = []

    async def write(token: str, seen: datetime.datetime) -> None:
        writes.append(seen)
        tracker.touch(token, seen + datetime.timedelta(seconds=1))  # a request meanwhile

    tracker = ActivityTracker(write)
    tracker.touch("t", NOW)
    await tracker.flush(NOW, idle_minutes=0)
    await tracker.flush(NOW + datetime.timedelta(minutes=1), idle_minutes=0)
    assert writes == [NOW, NOW + datetime.timedelta(seconds=1)]


async def test_a_token_whose_use_is_written_is_forgotten_an_hour_on() -> None:
    tracker = ActivityTracker(lambda token, seen: asyncio.sleep(0))
    tracker.touch("written", NOW)
    await tracker.flush(NOW, idle_minutes=0)
    tracker.touch("unwritten", NOW)
    tracker.prune(NOW + activity.FORGET_AFTER)
    assert tracker.last_seen("written", None) == NOW
    tracker.prune(NOW + activity.FORGET_AFTER + datetime.timedelta(seconds=1))
    assert tracker.last_seen("written", None) is None
    assert tracker.last_seen("unwritten", None) == NOW  # its use is not written down yet


async def test_a_token_revoked_while_an_earlier_write_is_on_the_way_is_not_written() -> None:
    """A tick writes its tokens one after another; one revoked (forgotten) while an earlier
    one's write is on its way is skipped, and the tick goes on: it once raised there, which
    ended the writer for good, and from then on no use was written down."""
    writes: list[str] = []

    async def write(token: str, seen: datetime.datetime) -> None:
        writes.append(token)
        if token == "first":
            tracker.forget("revoked")  # its DELETE /v3/tokens meanwhile

    tracker = ActivityTracker(write)
    for token in ("first", "revoked", "last"):
        tracker.touch(token, NOW)
    await tracker.flush(NOW, idle_minutes=0)
    assert writes == ["first", "last"]
    assert tracker.due(NOW + datetime.timedelta(minutes=2), idle_minutes=0) == []
    assert tracker.last_seen("revoked", None) is None


async def test_a_use_during_an_earlier_tokens_write_is_the_one_written() -> None:
    """A tick's later tokens are written with their latest use, not the one seen when the
    tick began: nothing is owed for them afterwards, so an older time would stand until the
    token's next use after the interval."""
    writes: dict[str, datetime.datetime] = {}
    later = NOW + datetime.timedelta(seconds=1)

    async def write(token: str, seen: datetime.datetime) -> None:
        writes[token] = seen
        if token == "first":
            tracker.touch("second", later)  # a request meanwhile

    tracker = ActivityTracker(write)
    for token in ("first", "second"):
        tracker.touch(token, NOW)
    await tracker.flush(NOW, idle_minutes=0)
    assert writes == {"first": NOW, "second": later}


async def test_the_writer_outlives_a_tick_that_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a tick raises, the next tick writes: a writer that stopped would leave every
    later use unwritten, and other replicas would take live sessions for idle ones."""
    monkeypatch.setattr(activity, "TICK_SECONDS", 0.01)
    written = asyncio.Event()

    async def write(token: str, seen: datetime.datetime) -> None:
        written.set()

    failures = [RuntimeError("the settings could not be read")]

    def idle_minutes() -> float:
        if failures:
            raise failures.pop()
        return 0.0

    tracker = ActivityTracker(write)
    tracker.touch("t", NOW)
    runner = asyncio.create_task(tracker.run(idle_minutes))
    try:
        async with asyncio.timeout(5):
            await written.wait()
    finally:
        runner.cancel()
