"""`http.renderings`: a rendering is kept under its key, the least recently used going first."""

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
        assert kept.get(key, lambda key=key: render(key)) == {"id": key}
    assert made == ["a", "b", "c", "b"]  # b went when c came: a had been used since
