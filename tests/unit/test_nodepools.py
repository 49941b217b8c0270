"""Node pools' pure parts: hostnames, scale-down order, field checks, status."""

from __future__ import annotations

import datetime

import pytest

from corral.core.api import condition_types as ct
from corral.core.errors import Invalid
from corral.core.nodepools import naming, plan, spec
from corral.core.nodepools.status import Counts, pool_conditions, state


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("worker", ["worker1", "worker2", "worker3"]),
        ("worker01", ["worker01", "worker02", "worker03"]),
        ("pool-5", ["pool-5", "pool-6", "pool-7"]),
        ("w-", ["w-1", "w-2", "w-3"]),
    ],
)
def test_hostnames_follow_the_prefixs_number_and_width(prefix: str, expected: list[str]) -> None:
    assert naming.new_hostnames(prefix, set(), 3) == expected


def test_new_hostnames_fill_the_gaps_first() -> None:
    taken = {"w1", "w3", "w4"}
    assert naming.new_hostnames("w", taken, 3) == ["w2", "w5", "w6"]


def test_padding_grows_past_its_width() -> None:
    assert naming.new_hostnames("n9", set(), 2) == ["n9", "n10"]


def test_scale_down_removes_the_natural_highest() -> None:
    names = ["w2", "w12", "w1", "w10", "w3"]
    assert naming.highest(names, 2) == ["w12", "w10"]
    assert naming.highest(names, 0) == []
    assert naming.highest(["w1"], 5) == ["w1"]


@pytest.mark.parametrize("prefix", ["Worker", "-w", "w_1", "a" * 59, "", 3, None])
def test_a_prefix_that_makes_no_dns_label_is_refused(prefix: object) -> None:
    with pytest.raises(Invalid) as caught:
        spec.hostname_prefix(prefix)
    assert caught.value.field == "hostnamePrefix"


def test_the_longest_prefix_still_makes_dns_labels_with_five_digits() -> None:
    prefix = spec.hostname_prefix("a" * spec.MAX_PREFIX)
    assert len(naming.hostname(prefix, 99999)) == 63


@pytest.mark.parametrize("value", [-1, 1001, True, 1.5, "3", None])
def test_quantity_is_a_whole_number_within_bounds(value: object) -> None:
    with pytest.raises(Invalid) as caught:
        spec.quantity(value)
    assert caught.value.field == "quantity"


def test_quantity_bounds_are_accepted() -> None:
    assert spec.quantity(0) == 0
    assert spec.quantity(spec.MAX_QUANTITY) == spec.MAX_QUANTITY


def test_not_ready_seconds_are_bounded() -> None:
    assert spec.not_ready_secs(spec.MAX_NOT_READY_SECS) == spec.MAX_NOT_READY_SECS
    with pytest.raises(Invalid):
        spec.not_ready_secs(spec.MAX_NOT_READY_SECS + 1)


def test_labels_and_annotations_errors_name_the_pools_field() -> None:
    assert spec.node_labels({"tier": "db"}) == {"tier": "db"}
    with pytest.raises(Invalid) as caught:
        spec.node_labels({"tier": "not a value"})
    assert caught.value.field == "nodeLabels"
    assert caught.value.message.startswith("nodeLabels")
    with pytest.raises(Invalid) as caught:
        spec.node_annotations({"management.svc.io/x": "y"})
    assert caught.value.field == "nodeAnnotations"


def _pool(conditions: list[dict[str, str]], generation: int = 2, seen: int = 2) -> dict:
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": seen, "conditions": conditions},
    }


def _as_dicts(quantity: int, counts: Counts, error: str = "") -> list[dict[str, str]]:
    return [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
        for c in pool_conditions(quantity, counts, error)
    ]


def test_a_pool_with_all_its_machines_ready_is_active() -> None:
    assert state(_pool(_as_dicts(3, Counts(3, 0, 3, 0)))) == ("active", "no", "")


def test_a_scaling_pool_is_provisioning_and_says_how_far() -> None:
    current, transitioning, message = state(_pool(_as_dicts(5, Counts(3, 0, 3, 0))))
    assert (current, transitioning) == ("provisioning", "yes")
    assert "3 of 5 machine(s)" in message


def test_a_failing_machine_is_an_error_with_the_last_error() -> None:
    conditions = _as_dicts(3, Counts(3, 0, 2, 1), "quota exceeded")
    assert conditions[0]["reason"] == ct.REASON_MACHINES_FAILING
    assert state(_pool(conditions)) == ("error", "error", "1 machine(s) failing: quota exceeded")


def test_a_pool_not_yet_seen_at_its_generation_is_provisioning() -> None:
    assert state(_pool(_as_dicts(3, Counts(3, 0, 3, 0)), generation=3))[0] == "provisioning"


NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)


def _node(ready: str = "True", unreachable_for: int | None = None) -> dict:
    spec: dict = {}
    if unreachable_for is not None:
        added = (NOW - datetime.timedelta(seconds=unreachable_for)).isoformat()
        spec["taints"] = [{"key": plan.UNREACHABLE, "effect": "NoExecute", "timeAdded": added}]
    return {"spec": spec, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


def test_a_plan_scales_up_into_the_gaps_and_down_from_the_top() -> None:
    up = plan.plan("w", 4, ["w1", "w3"], {}, 0, NOW)
    assert (up.add, up.remove, up.replace) == (["w2", "w4"], [], [])
    down = plan.plan("w", 1, ["w1", "w2", "w10"], {}, 0, NOW)
    assert (down.add, down.remove) == ([], ["w10", "w2"])


def test_a_node_unreachable_longer_than_allowed_is_replaced_under_a_new_name() -> None:
    nodes = {"w1": _node(), "w2": _node("Unknown", unreachable_for=31)}
    decided = plan.plan("w", 2, ["w1", "w2"], nodes, 30, NOW)
    assert (decided.replace, decided.remove, decided.add) == (["w2"], [], ["w3"])


@pytest.mark.parametrize(
    ("node", "secs"),
    [
        (_node("Unknown", unreachable_for=29), 30),  # not long enough yet
        (_node("False", unreachable_for=300), 30),  # NotReady but reachable: Rancher keeps it
        (_node("Unknown", unreachable_for=300), 0),  # 0 disables
    ],
)
def test_a_node_is_kept_short_of_the_rule(node: dict, secs: int) -> None:
    assert plan.plan("w", 1, ["w1"], {"w1": node}, secs, NOW).replace == []


def test_machines_leaving_keep_their_names_and_are_made_again() -> None:
    # w2's record was deleted and w3 failed: neither stays, neither name is free yet.
    decided = plan.plan("w", 3, ["w1", "w2", "w3"], {}, 0, NOW, leaving={"w2", "w3"})
    assert (decided.replace, decided.remove, decided.add) == ([], [], ["w4", "w5"])
    # Leaving ones are not removed again as surplus, nor replaced as unreachable.
    nodes = {"w2": _node("Unknown", unreachable_for=300)}
    shrunk = plan.plan("w", 0, ["w1", "w2"], nodes, 30, NOW, leaving={"w2"})
    assert (shrunk.replace, shrunk.remove, shrunk.add) == ([], ["w1"], [])


@pytest.mark.parametrize(
    ("conditions", "age", "replaced"),
    [
        ([{"type": "Provisioned", "status": "False"}], 121, True),
        ([{"type": "Initialized", "status": "False"}], 121, True),
        ([{"type": "Provisioned", "status": "False"}], 119, False),  # not 2 minutes yet
        ([{"type": "Provisioned", "status": "Unknown"}], 600, False),  # still provisioning
        ([{"type": "Registered", "status": "False"}], 600, False),  # made, not joined yet
    ],
)
def test_a_machine_failing_two_minutes_after_its_creation_is_replaced(
    conditions: list[dict[str, str]], age: int, replaced: bool
) -> None:
    created = NOW - datetime.timedelta(seconds=age)
    assert plan.failed_too_long(created, conditions, NOW) is replaced
