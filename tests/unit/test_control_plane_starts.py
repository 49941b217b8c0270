"""How many new control planes an operator replica starts at once: slots given in the order
the clusters asked, given back when a control plane is Ready or its cluster goes, and taken
back from a start that holds one too long."""

from __future__ import annotations

from corral.operator.controlplane.starts import Starts


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_starts_beyond_the_limit_wait_in_the_order_they_asked() -> None:
    starts, log = Starts(limit=2, hold=60.0, clock=Clock()), list[str]()
    assert starts.admit("a", lambda: None) == 0
    assert starts.admit("b", lambda: None) == 0
    assert starts.admit("c", lambda: log.append("c")) == 1
    assert starts.admit("d", lambda: log.append("d")) == 2
    # Asking again keeps the place; a slot already given stays given.
    assert starts.admit("d", lambda: log.append("d")) == 2
    assert starts.admit("a", lambda: None) == 0
    starts.done("a")
    # Every one waiting is woken when the queue moves: c to start, d to show its place.
    assert log == ["c", "d"]
    # d may not jump the queue while c has not taken the slot.
    assert starts.admit("d", lambda: log.append("d")) == 2
    log.clear()
    assert starts.admit("c", lambda: log.append("c")) == 0
    assert log == ["d"]
    assert starts.admit("d", lambda: log.append("d")) == 1


def test_a_cluster_that_goes_while_waiting_leaves_the_queue() -> None:
    starts = Starts(limit=1, hold=60.0, clock=Clock())
    starts.admit("a", lambda: None)
    starts.admit("b", lambda: None)
    assert starts.admit("c", lambda: None) == 2
    starts.done("b")
    assert starts.admit("c", lambda: None) == 1
    starts.done("a")
    assert starts.admit("c", lambda: None) == 0


def test_a_start_that_holds_its_slot_too_long_gives_it_up() -> None:
    clock, log = Clock(), list[str]()
    starts = Starts(limit=1, hold=60.0, clock=clock)
    starts.admit("stuck", lambda: None)
    assert starts.admit("next", lambda: log.append("next")) == 1
    clock.now += 59.0
    assert starts.admit("next", lambda: log.append("next")) == 1
    clock.now += 1.0
    assert starts.admit("next", lambda: log.append("next")) == 0
    # The one that held it too long goes on without a slot and does not take one back.
    assert starts.admit("stuck", lambda: None) == 0
    assert starts.admit("other", lambda: None) == 1
    starts.done("next")
    assert starts.admit("other", lambda: None) == 0


def test_a_queued_cluster_waits_until_the_oldest_start_would_give_its_slot_up() -> None:
    clock = Clock()
    starts = Starts(limit=2, hold=60.0, clock=clock)
    assert starts.until_free() == 60.0
    starts.admit("a", lambda: None)
    clock.now += 20.0
    starts.admit("b", lambda: None)
    assert starts.admit("c", lambda: None) == 1
    assert starts.until_free() == 40.0
    clock.now += 45.0
    assert starts.until_free() == 0.0
    assert starts.admit("c", lambda: None) == 0
