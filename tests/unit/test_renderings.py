"""`http.renderings`: a rendering is kept under its family and key, the least recently used of
that family going first."""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.renderings import Renderings


def test_a_rendering_is_made_once_per_key_and_the_oldest_goes_first() -> None:
    made: list[str] = []

    def render(key: str) -> dict[str, Any]:
        made.append(key)
        return {"id": key}

    kept = Renderings(size=2)
    for key in ("a", "b", "a", "c", "a", "b"):
        assert kept.get("token", key, lambda key=key: render(key)) == {"id": key}
    assert made == ["a", "b", "c", "b"]  # b went when c came: a had been used since


def test_one_familys_many_renderings_leave_anothers_kept() -> None:
    made: list[tuple[str, str]] = []

    def render(family: str, key: str) -> dict[str, Any]:
        made.append((family, key))
        return {"id": key}

    kept = Renderings(size=2)
    kept.get("token", "t", lambda: render("token", "t"))
    for key in ("w1", "w2", "w3"):
        kept.get("workload", key, lambda key=key: render("workload", key))
    assert kept.get("token", "t", lambda: render("token", "t")) == {"id": "t"}
    # The same key in two families is two renderings.
    assert kept.get("workload", "t", lambda: render("workload", "t")) == {"id": "t"}
    assert made == [("token", "t"), ("workload", "w1"), ("workload", "w2"), ("workload", "w3"),
                    ("workload", "t")]  # fmt: skip
