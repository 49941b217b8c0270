"""`http.rows.fuller`: rows knowing fields read from their objects, made again after some
objects changed, read only those again; added, changed and removed objects show."""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.rows import Fuller, Rows, fuller


def test_fuller_rows_read_again_only_the_objects_that_changed() -> None:
    objects: dict[str, dict[str, Any]] = {name: {"state": "active"} for name in ("a", "b", "c")}
    read: list[str] = []

    def state(name: str, obj: dict[str, Any]) -> dict[str, Any]:
        read.append(name)
        return {"state": obj["state"]}

    def made(names: list[str], previous: Fuller[str] | None) -> Fuller[str]:
        rows = Rows((name, {"name": name}, name) for name in names)
        return fuller(rows, objects.__getitem__, state, previous)

    first = made(["a", "b", "c"], None)
    assert [row[1] for row in first.rows] == [{"name": n, "state": "active"} for n in "abc"]
    assert sorted(read) == ["a", "b", "c"]
    read.clear()
    objects["b"] = {"state": "paused"}  # a cache replaces an object that changed
    objects["d"] = {"state": "updating"}
    again = made(["a", "b", "d"], first)  # c went, d came
    assert sorted(read) == ["b", "d"]
    assert [(row[0], row[1]["state"]) for row in again.rows] == [
        ("a", "active"), ("b", "paused"), ("d", "updating")
    ]  # fmt: skip
    assert again.rows.where("state", "paused") == [again.seen["b"][1]]
    assert again.seen["a"][1] is first.seen["a"][1]  # kept, not made again
    assert "c" not in again.seen
