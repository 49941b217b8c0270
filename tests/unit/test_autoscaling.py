"""The autoscaler's pure rules: requests, fit, candidates, packing, the pool chosen, unneeded
nodes, movable pods, timers and what is removed."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from corral.core import settings
from corral.core.nodepools import autoscaling as a
from corral.core.nodepools import plan

NOW = datetime.datetime(2026, 11, 24, 12, 0, tzinfo=datetime.UTC)
GI = 1024**3


def pod(
    name: str,
    cpu: str = "0",
    memory: str = "0",
    *,
    node: str = "",
    pending: bool = False,
    owner: str | None = "ReplicaSet",
    namespace: str = "default",
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o", "controller": True}]
    body: dict[str, Any] = {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu,
                                                                         "memory": memory}}}],
                 **spec},
        "status": {"phase": "Pending" if pending else "Running"},
    }  # fmt: skip
    if node:
        body["spec"]["nodeName"] = node
    if pending:
        body["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    return body


def shape(name: str = "", cpu: str = "2", memory: str = "4Gi", **kw: Any) -> a.Shape:
    return a.Shape(name, a.resources({"cpu": cpu, "memory": memory, "pods": "110"}), **kw)


def group(name: str = "np-a", quantity: int = 1, low: int = 1, high: int = 3,
          template: a.Shape | None = None, upcoming: int = 0) -> a.Group:  # fmt: skip
    return a.Group(name, quantity, low, high, template or shape(labels={"pool": name}), upcoming)


# -- requests and fit -------------------------------------------------------------------------


def test_requests_sum_containers_and_take_the_largest_init_container() -> None:
    body = pod("p", "500m", "1Gi")
    body["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "250m"}}})
    body["spec"]["initContainers"] = [
        {"name": "i", "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}},
        {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
    ]
    body["spec"]["overhead"] = {"cpu": "10m"}
    assert a.pod_requests(body) == a.Resources(2010, 2 * GI, 1)


def test_a_bad_stored_quantity_counts_as_nothing() -> None:
    assert a.resources({"cpu": "lots", "memory": "1Ki"}) == a.Resources(0, 1024, 0)
    assert a.resources({"cpu": "1.0001"}).cpu == 1001  # rounded up to the next millicore


def test_a_pod_fits_by_requests() -> None:
    node = shape("n", cpu="2")
    assert a.fits(pod("p", "1500m"), node)
    assert not a.fits(pod("p", "1500m"), node, a.Resources(cpu=600))
    assert not a.fits(pod("p", memory="5Gi"), node)
    full = a.Shape("n", a.Resources(2000, GI, 1))
    assert not a.fits(pod("p"), full, a.Resources(pods=1))


@pytest.mark.parametrize(
    ("selector", "affinity", "fits"),
    [
        ({"tier": "web"}, None, True),
        ({"tier": "db"}, None, False),
        (None, [{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}],
         True),
        (None, [{"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]}],
         False),
        (None, [{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}], True),
        (None, [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}], False),
        (None, [{"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["3"]}]}], True),
        (None, [{"matchExpressions": [{"key": "size", "operator": "Lt", "values": ["3"]}]}], False),
        # Terms are ORed; an empty term matches nothing.
        (None, [{}, {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}], True),
        (None, [{}], False),
        # A template node has no name yet; an existing node does.
        (None, [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}],
         False),
    ],
)  # fmt: skip
def test_node_selector_and_required_affinity(
    selector: dict[str, str] | None, affinity: list[dict[str, Any]] | None, fits: bool
) -> None:
    spec: dict[str, Any] = {}
    if selector:
        spec["nodeSelector"] = selector
    if affinity is not None:
        required = {"nodeSelectorTerms": affinity}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                             required}}  # fmt: skip
    template = shape(labels={"tier": "web", "size": "4"})
    assert a.fits(pod("p", **spec), template) is fits


def test_match_fields_name_an_existing_node() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                          {"nodeSelectorTerms": [term]}}}}  # fmt: skip
    assert a.fits(pod("p", **spec), shape("n1"))
    assert not a.fits(pod("p", **spec), shape("n2"))


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ([], False),
        ([{"key": "pool", "operator": "Equal", "value": "db"}], True),
        ([{"key": "pool", "value": "web"}], False),
        ([{"key": "pool", "operator": "Exists", "effect": "NoSchedule"}], True),
        ([{"key": "pool", "operator": "Exists", "effect": "NoExecute"}], False),
        ([{"operator": "Exists"}], True),
    ],
)
def test_taints_need_tolerations(tolerations: list[dict[str, str]], fits: bool) -> None:
    taints = ({"key": "pool", "value": "db", "effect": "NoSchedule"},
              {"key": "soft", "effect": "PreferNoSchedule"})  # fmt: skip
    assert a.fits(pod("p", tolerations=tolerations), shape(taints=taints)) is fits


def test_candidates_are_unschedulable_pods_not_of_daemonsets() -> None:
    waiting = pod("wait", pending=True)
    daemon = pod("ds", pending=True, owner="DaemonSet")
    gated = pod("gated", pending=True)
    gated["status"]["conditions"][0]["reason"] = "SchedulingGated"
    going = pod("going", pending=True)
    going["metadata"]["deletionTimestamp"] = "2026-11-24T12:00:00Z"
    placed = pod("placed", node="n1")
    assert a.unschedulable([waiting, daemon, gated, going, placed]) == [waiting]


# -- scale up ---------------------------------------------------------------------------------


def test_first_fit_decreasing_packs_the_pods_on_as_few_nodes_as_it_can() -> None:
    # 1500m, 1500m, 500m, 500m on 2-cpu nodes: first fit decreasing needs 2 nodes.
    pending = [pod(f"p{i}", c, pending=True) for i, c in enumerate(["500m", "1500m", "500m",
                                                                    "1500m"])]  # fmt: skip
    decided = a.scale_up([group(quantity=1, high=5)], pending, [])
    assert decided.chosen is not None
    assert (decided.chosen.before, decided.chosen.after) == (1, 3)
    assert sorted(decided.chosen.pods) == [f"default/p{i}" for i in range(4)]
    assert decided.chosen.waste == pytest.approx((0 + 1) / 2)  # cpu full, no memory asked


def test_pods_that_fit_existing_or_upcoming_nodes_ask_for_nothing() -> None:
    pending = [pod("p1", "1500m", pending=True), pod("p2", "1500m", pending=True)]
    room = a.Bin(shape("n1", labels={"pool": "np-a"}), a.Resources(cpu=500))
    assert a.scale_up([group(upcoming=1)], pending, [room]).chosen is None
    decided = a.scale_up([group()], pending, [room])
    assert decided.chosen is not None and decided.chosen.after == 2


def test_the_count_is_capped_at_the_maximum() -> None:
    pending = [pod(f"p{i}", "1500m", pending=True) for i in range(4)]
    decided = a.scale_up([group(quantity=1, high=3)], pending, [])
    assert decided.chosen is not None and decided.chosen.after == 3
    assert len(decided.chosen.pods) == 2
    at_max = a.scale_up([group(quantity=3, high=3)], pending, [])
    assert at_max.chosen is None
    assert "at their maximum size: np-a (3)" in at_max.refused["default/p0"]


def test_a_pod_that_fits_no_pool_makes_none_grow() -> None:
    huge = pod("huge", "64", pending=True)
    elsewhere = pod("elsewhere", pending=True, nodeSelector={"pool": "nothing"})
    decided = a.scale_up([group()], [huge, elsewhere], [])
    assert decided.chosen is None
    assert set(decided.refused) == {"default/huge", "default/elsewhere"}
    assert "fits no node pool" in decided.refused["default/huge"]
    unknown = a.scale_up([a.Group("np-x", 1, 1, 3, None)], [pod("p", pending=True)], [])
    assert unknown.chosen is None and "fits no node pool" in unknown.refused["default/p"]


def test_the_pool_wasting_least_wins_ties_by_name() -> None:
    pending = [pod("p", "1500m", "1Gi", pending=True)]
    big = group("np-big", template=shape(cpu="8", memory="16Gi"))
    small = group("np-small", template=shape(cpu="2", memory="2Gi"))
    decided = a.scale_up([big, small], pending, [])
    assert decided.chosen is not None and decided.chosen.group == "np-small"
    twins = a.scale_up([group("np-b"), group("np-a")], pending, [])
    assert twins.chosen is not None and twins.chosen.group == "np-a"


# -- scale down -------------------------------------------------------------------------------


def test_utilization_is_the_larger_of_cpu_and_memory() -> None:
    total = a.Resources(2000, 4 * GI, 110)
    assert a.utilization(a.Resources(500, GI * 3, 5), total) == 0.75
    assert a.utilization(a.Resources(), a.Resources()) == 0.0
    assert a.utilization(a.Resources(cpu=1), a.Resources()) == 1.0


@pytest.mark.parametrize(
    ("change", "blocks"),
    [
        ({}, None),
        ({"owner": None}, "no controller"),
        ({"volumes": [{"name": "v", "emptyDir": {}}]}, "local storage"),
        ({"namespace": "kube-system"}, "kube-system"),
        ({"annotations": {a.SAFE_TO_EVICT: "false"}}, "safe-to-evict"),
        ({"owner": None, "annotations": {a.SAFE_TO_EVICT: "true"}}, None),
    ],
)
def test_movable_pods(change: dict[str, Any], blocks: str | None) -> None:
    annotations = change.pop("annotations", None)
    body = pod("p", **change)
    if annotations:
        body["metadata"]["annotations"] = annotations
    found = a.blocker(body)
    assert (found is None) if blocks is None else (blocks in (found or ""))


def test_daemonset_static_and_finished_pods_need_not_move() -> None:
    mirror = pod("m", owner=None)
    mirror["metadata"]["annotations"] = {a.MIRROR: "x"}
    done = pod("d")
    done["status"]["phase"] = "Succeeded"
    assert [a.must_move(p) for p in (pod("ds", owner="DaemonSet"), mirror, done, pod("p"))] == [
        False, False, False, True,
    ]  # fmt: skip


def nodes_of(*names: str, cpu: str = "2") -> dict[str, a.Shape]:
    return {n: shape(n, cpu=cpu) for n in names}


def test_an_empty_node_is_unneeded_down_to_the_minimum() -> None:
    candidates = [a.Candidate(n, "np-a") for n in ("w1", "w2", "w3")]
    found = a.unneeded(candidates, nodes_of("w1", "w2", "w3"), {}, 0.5, {"np-a": 2})
    # The natural-highest names go first, as a pool scales down.
    assert found == {"w3": True, "w2": True}
    assert a.unneeded(candidates, nodes_of("w1", "w2", "w3"), {}, 0.5, {"np-a": 0}) == {}


def test_a_busy_node_is_needed() -> None:
    busy = {"w1": [pod("p", "1", node="w1")]}
    found = a.unneeded([a.Candidate("w1", "np-a")], nodes_of("w1", "w2"), busy, 0.5, {"np-a": 1})
    assert found == {}
    # With a higher threshold it goes, its pod moving to w2.
    found = a.unneeded([a.Candidate("w1", "np-a")], nodes_of("w1", "w2"), busy, 0.6, {"np-a": 1})
    assert found == {"w1": False}


def test_a_node_whose_pods_fit_nowhere_else_or_cannot_move_is_needed() -> None:
    small = {"w1": [pod("p", "900m", node="w1")], "w2": [pod("q", "1500m", node="w2")]}
    found = a.unneeded([a.Candidate("w1", "np-a")], nodes_of("w1", "w2"), small, 0.5,
                       {"np-a": 1})  # fmt: skip
    assert found == {}
    bare = {"w1": [pod("p", "100m", node="w1", owner=None)]}
    found = a.unneeded([a.Candidate("w1", "np-a")], nodes_of("w1", "w2"), bare, 0.5, {"np-a": 1})
    assert found == {}
    closed = {"w1": [pod("p", "100m", node="w1")]}
    found = a.unneeded([a.Candidate("w1", "np-a")], nodes_of("w1", "w2"), closed, 0.5,
                       {"np-a": 1}, closed={"w2"})  # fmt: skip
    assert found == {}


def test_pods_moved_in_the_simulation_take_their_room() -> None:
    # w2 and w3 each hold 600m; both cannot empty onto w1 (2 cpu) and each other at once.
    pods = {"w2": [pod("a", "900m", node="w2")], "w3": [pod("b", "900m", node="w3")],
            "w1": [pod("c", "1", node="w1")]}  # fmt: skip
    candidates = [a.Candidate("w2", "np-a"), a.Candidate("w3", "np-a")]
    found = a.unneeded(candidates, nodes_of("w1", "w2", "w3"), pods, 0.5, {"np-a": 2})
    assert len(found) == 1


def test_timers_keep_their_start_while_a_node_stays_unneeded() -> None:
    earlier = NOW - datetime.timedelta(minutes=3)
    since = a.track({"w1": earlier, "w9": earlier}, ["w1", "w2"], NOW)
    assert since == {"w1": earlier, "w2": NOW}


def test_removals_wait_their_time_empty_ones_in_bulk_others_one_at_a_time() -> None:
    old = NOW - datetime.timedelta(seconds=700)
    found = {"w1": True, "w2": True, "w3": True, "w4": False, "w5": False, "w6": True}
    since = {n: old for n in found} | {"w6": NOW}
    wait = datetime.timedelta(seconds=600)
    assert a.removals(found, since, NOW, wait, 2, False) == ["w3", "w2", "w5"]
    assert a.removals(found, since, NOW, wait, 10, True) == ["w3", "w2", "w1"]


def test_capacity_annotations_give_a_template() -> None:
    prefix = a.CAPACITY_PREFIX
    assert a.template_capacity({prefix + "cpu": "4"}) is None
    assert a.template_capacity({prefix + "cpu": "4", prefix + "memory": "8Gi"}) == {
        "cpu": "4", "memory": "8Gi", "pods": "110",
    }  # fmt: skip


def test_marked_machines_go_first() -> None:
    decided = plan.plan("w", 2, ["w1", "w2", "w3"], {}, 0, NOW, marked={"w1"})
    assert decided.remove == ["w1"]
    more = plan.plan("w", 1, ["w1", "w2", "w3"], {}, 0, NOW, marked={"w1"})
    assert more.remove == ["w1", "w3"]
    # A mark does not remove a machine the quantity keeps.
    assert plan.plan("w", 3, ["w1", "w2", "w3"], {}, 0, NOW, marked={"w1"}).remove == []


def test_the_knobs_are_bounded_settings() -> None:
    assert settings.number(settings.SCALE_DOWN_UTILIZATION_SETTING, None) == 0.5
    for name, bad in ((settings.SCALE_DOWN_UTILIZATION_SETTING, "1.5"),
                      (settings.SCALE_DOWN_UNNEEDED_SETTING, "604801"),
                      (settings.SCALE_DOWN_DELAY_AFTER_ADD_SETTING, "1.5"),
                      (settings.MAX_EMPTY_BULK_DELETE_SETTING, "0")):  # fmt: skip
        with pytest.raises(settings.SettingValueError):
            settings.check(name, bad)
