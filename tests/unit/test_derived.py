"""`state.derived`: a value derived from caches is kept until one of them changes."""

from __future__ import annotations

from lightkube.resources.core_v1 import Namespace

from corral.apiserver.state.derived import Derived
from corral.core.kube.informer import Informer


def cache() -> Informer:
    return Informer(None, Namespace)  # type: ignore[arg-type]  # never run: fed by `put`


def test_a_value_is_derived_again_only_after_a_source_changed() -> None:
    spaces, other = cache(), cache()
    kept: Derived[str, int] = Derived()
    calls: list[int] = []

    def derive() -> int:
        calls.append(len(spaces))
        return len(spaces)

    assert kept.get("p", [spaces, other], derive) == 0
    assert kept.get("p", [spaces, other], derive) == 0
    assert calls == [0]
    spaces.put({"metadata": {"name": "a", "resourceVersion": "1"}})
    assert kept.get("p", [spaces, other], derive) == 1
    other.forget("nothing")  # no change: nothing to derive again
    assert kept.get("p", [spaces, other], derive) == 1
    assert calls == [0, 1]


def test_another_cache_at_the_same_version_is_another_source() -> None:
    kept: Derived[str, str] = Derived()
    assert kept.get("p", [cache()], lambda: "first") == "first"
    assert kept.get("p", [cache()], lambda: "second") == "second"


def test_the_least_recently_used_values_go_first() -> None:
    source = cache()
    kept: Derived[str, str] = Derived(size=2)
    kept.get("a", [source], lambda: "a")
    kept.get("b", [source], lambda: "b")
    kept.get("a", [source], lambda: "a again")  # used: kept
    kept.get("c", [source], lambda: "c")  # b goes
    assert kept.get("a", [source], lambda: "a again") == "a"
    assert kept.get("b", [source], lambda: "b again") == "b again"
