"""JSON patch (RFC 6902) operations built from an object as read: pointers, `test` operations
that make a patch conditional on the values a change was decided from, and additions that
work whether or not the parents of their path exist yet.

A patch's `test` operations are checked by kube-apiserver against the object as stored when
the patch is applied, and applied again to the object as stored if another write lands
meanwhile: a patch guarded by them is a compare-and-swap on those values alone, which other
writers' changes (the operator's status, another field's update) do not break.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Path = tuple[str, ...]
Operation = dict[str, Any]

_ABSENT = object()


def pointer(path: Iterable[str]) -> str:
    """`path` as a JSON pointer (RFC 6901): `~` and `/` inside a key escaped."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def test(obj: Mapping[str, Any], path: Path) -> Operation:
    """The `test` operation that holds while the value at `path` is what `obj` has there.

    A value `obj` lacks is tested as null at the first key missing on the way: kube-apiserver
    passes a test of null on a missing member, but fails any test below a missing object. So
    a missing value is tested as missing, and a parent made meanwhile fails it too (stricter
    than needed, never looser)."""
    node: Any = obj
    for depth, key in enumerate(path):
        if not isinstance(node, Mapping):
            # Something else where an object was expected: that is what was read.
            return {"op": "test", "path": pointer(path[:depth]), "value": node}
        if node.get(key) is None:
            return {"op": "test", "path": pointer(path[: depth + 1]), "value": None}
        node = node[key]
    return {"op": "test", "path": pointer(path), "value": node}


def tests(obj: Mapping[str, Any], paths: Iterable[Path]) -> list[Operation]:
    return [test(obj, path) for path in paths]


def add(obj: Mapping[str, Any], path: Path, value: Any) -> Operation:
    """The operation that sets `path` to `value` in `obj`, making the objects on the way that
    `obj` lacks (an `add` whose parent is missing fails)."""
    node: Any = obj
    for depth, key in enumerate(path[:-1]):
        child = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(child, Mapping):
            nested = value
            for inner in reversed(path[depth + 1 :]):
                nested = {inner: nested}
            return {"op": "add", "path": pointer(path[: depth + 1]), "value": nested}
        node = child
    return {"op": "add", "path": pointer(path), "value": value}


def from_merge(obj: Mapping[str, Any], merge: Mapping[str, Any], at: Path = ()) -> list[Operation]:
    """The operations that do to `obj` what the JSON merge patch (RFC 7386) `merge` does: a
    null removes a key (when there is one), an object merges into an object, anything else
    replaces."""
    operations: list[Operation] = []
    for key, value in merge.items():
        current = obj.get(key, _ABSENT)
        path = (*at, key)
        if value is None:
            if current is not _ABSENT:
                operations.append({"op": "remove", "path": pointer(path)})
        elif isinstance(value, Mapping) and isinstance(current, Mapping):
            operations += from_merge(current, value, path)
        else:
            operations.append({"op": "add", "path": pointer(path), "value": _merged(value)})
    return operations


def _merged(value: Any) -> Any:
    """A merge patch's object put where there was none: its nulls are no keys."""
    if isinstance(value, Mapping):
        return {k: _merged(v) for k, v in value.items() if v is not None}
    return value
