"""JSON patch operations built from an object as read (`corral.core.jsonpatch`): the guards of
a read-modify-write and the additions it makes."""

from __future__ import annotations

from typing import Any

import pytest

from corral.core import jsonpatch

OBJ: dict[str, Any] = {
    "metadata": {"generation": 4, "annotations": {"svc.io/pools-hash": "abc", "a~b": "x"}},
    "spec": {"kubernetesVersion": "v1.35.4", "rke2Config": {"networking": {"plugin": "canal"}}},
    "status": {"provisioning": {"appliedVersion": "v1.35.4"}},
}


def test_a_pointer_escapes_tilde_and_slash() -> None:
    assert jsonpatch.pointer(("metadata", "annotations", "svc.io/pools-hash")) == (
        "/metadata/annotations/svc.io~1pools-hash"
    )
    assert jsonpatch.pointer(("a~b",)) == "/a~0b"
    assert jsonpatch.pointer(()) == ""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("metadata", "generation"), ("/metadata/generation", 4)),
        (("metadata", "annotations", "svc.io/pools-hash"),
         ("/metadata/annotations/svc.io~1pools-hash", "abc")),
        (("status", "provisioning"), ("/status/provisioning", {"appliedVersion": "v1.35.4"})),
        # Missing: tested as null at the first key missing, never below it.
        (("status", "provisioning", "restoreGeneration"),
         ("/status/provisioning/restoreGeneration", None)),
        (("status", "nothing", "below"), ("/status/nothing", None)),
        # Something else where an object was expected: what was read there.
        (("spec", "kubernetesVersion", "deeper"), ("/spec/kubernetesVersion", "v1.35.4")),
    ],
)  # fmt: skip
def test_a_guard_tests_the_value_read_or_its_absence(
    path: jsonpatch.Path, expected: tuple[str, Any]
) -> None:
    pointer, value = expected
    assert jsonpatch.test(OBJ, path) == {"op": "test", "path": pointer, "value": value}


def test_guards_of_an_object_without_status() -> None:
    bare = {"metadata": {"generation": 1}}
    assert jsonpatch.tests(bare, [("metadata", "generation"), ("status", "provisioning", "x")]) == [
        {"op": "test", "path": "/metadata/generation", "value": 1},
        {"op": "test", "path": "/status", "value": None},
    ]


def test_an_addition_makes_the_parents_the_object_lacks() -> None:
    assert jsonpatch.add(OBJ, ("metadata", "annotations", "k"), "v") == {
        "op": "add", "path": "/metadata/annotations/k", "value": "v",
    }  # fmt: skip
    bare = {"metadata": {"name": "p"}}
    assert jsonpatch.add(bare, ("metadata", "annotations", "k/1"), "v") == {
        "op": "add", "path": "/metadata/annotations", "value": {"k/1": "v"},
    }  # fmt: skip
    assert jsonpatch.add({}, ("spec", "a", "b"), 1) == {
        "op": "add", "path": "/spec", "value": {"a": {"b": 1}},
    }  # fmt: skip


def test_a_merge_patch_as_operations() -> None:
    merge = {
        "spec": {
            "kubernetesVersion": "v1.36.3",
            "rke2Config": {"networking": None, "etcd": {"snapshots": 5, "gone": None}},
            "absent": None,
        },
        "newTop": {"a": 1, "b": None},
    }
    assert jsonpatch.from_merge(OBJ, merge) == [
        {"op": "add", "path": "/spec/kubernetesVersion", "value": "v1.36.3"},
        {"op": "remove", "path": "/spec/rke2Config/networking"},
        {"op": "add", "path": "/spec/rke2Config/etcd", "value": {"snapshots": 5}},
        {"op": "add", "path": "/newTop", "value": {"a": 1}},
    ]
