"""`state.derived`: a value is kept while the stamp it was derived under stands."""

from __future__ import annotations

from lightkube.resources.core_v1 import Namespace

from corral.apiserver.state.derived import Derived
from corral.core.kube.informer import Informer


def cache() -> Informer:
    return Informer(None, Namespace)  # type: ignore[arg-type]  # never run: fed by `put`


def test_a_value_is_derived_again_only_under_another_stamp() -> None:
    spaces = cache()
    kept: Derived[str, int] = Derived()
    calls: list[int] = []

    def derive() -> int:
        calls.append(len(spaces))
        return len(spaces)

    assert kept.get("p", (spaces, spaces.members), derive) == 0
    assert kept.get("p", (spaces, spaces.members), derive) == 0
    assert calls == [0]
    spaces.put({"metadata": {"name": "a", "resourceVersion": "1"}})
    assert kept.get("p", (spaces, spaces.members), derive) == 1
    assert calls == [0, 1]


def test_another_cache_at_the_same_version_is_another_stamp() -> None:
    kept: Derived[str, str] = Derived()
    first, second = cache(), cache()
    assert kept.get("p", (first, first.version), lambda: "first") == "first"
    assert kept.get("p", (second, second.version), lambda: "second") == "second"


def test_the_least_recently_used_values_go_first() -> None:
    kept: Derived[str, str] = Derived(size=2)
    kept.get("a", 0, lambda: "a")
    kept.get("b", 0, lambda: "b")
    kept.get("a", 0, lambda: "a again")  # used: kept
    kept.get("c", 0, lambda: "c")  # b goes
    assert kept.get("a", 0, lambda: "a again") == "a"
    assert kept.get("b", 0, lambda: "b again") == "b again"


def test_members_move_when_an_object_comes_or_goes_not_when_it_changes() -> None:
    spaces = cache()
    spaces.put({"metadata": {"name": "a", "resourceVersion": "1"}})
    came, version = spaces.members, spaces.version
    spaces.put({"metadata": {"name": "a", "resourceVersion": "2", "labels": {"x": "y"}}})
    assert spaces.members == came and spaces.version > version
    spaces.forget("a")
    assert spaces.members == came + 1
    spaces.forget("a")  # nothing to forget
    assert spaces.members == came + 1
