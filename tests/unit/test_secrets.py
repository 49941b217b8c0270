"""Project and namespaced secrets: what a client may write, checked as Kubernetes checks it,
what a response may show, and the copies a project's namespaces get."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from corral.core.api import names
from corral.core.api.labels import MAX_ANNOTATIONS_SIZE, user_annotations, user_labels
from corral.core.errors import Invalid
from corral.core.projects import downstream, secrets
from corral.core.projects.downstream import ProjectView


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def refused(field: str, check: Any, *args: Any) -> str:
    with pytest.raises(Invalid) as caught:
        check(*args)
    assert caught.value.field == field
    return caught.value.message


# -- what a client may write --------------------------------------------------------------------


def test_names_are_dns_subdomains() -> None:
    assert secrets.check_name("db.password-1") == "db.password-1"
    for bad in ("", None, "Upper", "-x", "x_y", "a" * 254, 7):
        refused("name", secrets.check_name, bad)
    assert secrets.check_name("a" * 253)


def test_kinds_come_from_the_allowed_list_and_default_to_opaque() -> None:
    assert secrets.check_kind(None) == secrets.check_kind("") == "Opaque"
    assert secrets.check_kind("kubernetes.io/tls") == "kubernetes.io/tls"
    for bad in ("kubernetes.io/service-account-token", "bootstrap.kubernetes.io/token", "x", 1):
        refused("kind", secrets.check_kind, bad)


def test_keys_are_configmap_keys_and_values_base64() -> None:
    assert secrets.data_of({"data": {"a.b_C-1": b64("x"), "empty": ""}}, None) == {
        "a.b_C-1": b64("x"),
        "empty": "",
    }
    for key in ("a/b", ".", "..x", "a b", "k" * 254, ""):
        refused("data", secrets.data_of, {"data": {key: b64("x")}}, None)
    message = refused("data", secrets.data_of, {"data": {"k": "not base64!"}}, None)
    assert "not base64" not in message  # a value is never echoed
    refused("data", secrets.data_of, {"data": {"k": "YQ"}}, None)  # padding missing
    refused("data", secrets.data_of, {"data": ["a"]}, None)
    refused("data", secrets.data_of, {"data": {"k": 1}}, None)
    refused("stringData", secrets.data_of, {"stringData": {"a/b": "x"}}, None)


def test_string_data_is_written_over_data_or_over_what_is_kept() -> None:
    body = {"data": {"a": b64("1"), "b": b64("2")}, "stringData": {"b": "two", "c": "3"}}
    assert secrets.data_of(body, None) == {"a": b64("1"), "b": b64("two"), "c": b64("3")}
    current = {"a": b64("old"), "z": b64("kept")}
    assert secrets.data_of({"stringData": {"a": "new"}}, current) == {
        "a": b64("new"),
        "z": b64("kept"),
    }
    assert secrets.data_of({"data": {"b": b64("2")}}, current) == {"b": b64("2")}
    assert secrets.data_of({"labels": {}}, current) is None


def test_size_is_bounded_as_kubernetes_bounds_it() -> None:
    limit = secrets.MAX_SIZE
    secrets.check_data("Opaque", {"k": b64(b"x" * (limit - 1))})
    refused("data", secrets.check_data, "Opaque", {"k": b64(b"x" * limit)})
    refused("data", secrets.check_data, "Opaque", {"k1": b64(b"x" * (limit // 2)),
                                                   "k2": b64(b"x" * (limit // 2))})  # fmt: skip


def test_each_type_has_the_keys_kubernetes_requires() -> None:
    docker = {".dockerconfigjson": b64(json.dumps({"auths": {}}))}
    secrets.check_data("kubernetes.io/dockerconfigjson", docker)
    secrets.check_data("kubernetes.io/tls", {"tls.crt": b64("c"), "tls.key": b64("k")})
    secrets.check_data("kubernetes.io/basic-auth", {"username": b64("u")})
    secrets.check_data("kubernetes.io/ssh-auth", {"ssh-privatekey": b64("k")})
    cases = [
        ("kubernetes.io/dockerconfigjson", {}),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": b64("not json")}),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": b64("[1]")}),
        ("kubernetes.io/dockercfg", {".dockercfg": b64("[" * 100000)}),
        ("kubernetes.io/tls", {"tls.crt": b64("c")}),
        ("kubernetes.io/basic-auth", {"username": "", "password": ""}),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}),
    ]
    for kind, data in cases:
        refused("data", secrets.check_data, kind, data)


def test_labels_and_annotations_are_checked_and_corrals_own_refused() -> None:
    assert user_labels({"app": "db", "example.com/tier": ""}) == {
        "app": "db",
        "example.com/tier": "",
    }
    for bad in ({"a b": "x"}, {"app": "x" * 64}, {"app": "-x"}, {"app": 1}, ["app"]):
        refused("labels", user_labels, bad)
    for own in (names.LABEL_PROJECT_SECRET, names.LABEL_SECRET_COPY, names.LABEL_PROJECT):
        refused("labels", user_labels, {own: "p-x"})
        refused("annotations", user_annotations, {own: "p-x"})
    assert user_annotations({"note": "any text: at all"}) == {"note": "any text: at all"}
    big = {"note": "x" * MAX_ANNOTATIONS_SIZE}
    refused("annotations", user_annotations, big)
    refused("description", secrets.check_description, "x" * 1025)


# -- what a response shows ----------------------------------------------------------------------


def stored(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "s", "namespace": "ns", "uid": "u-1", "resourceVersion": "7", **meta},
        "type": "Opaque",
        "data": {"password": b64("hunter2"), "user": b64("me")},
    }


def test_a_response_shows_keys_and_the_users_metadata_only() -> None:
    obj = stored(
        labels={"app": "db", names.LABEL_PROJECT_SECRET: "p-a"},
        annotations={
            "note": "n",
            names.ANNOTATION_DESCRIPTION: "the db",
            secrets.LAST_APPLIED: json.dumps({"data": {"password": b64("hunter2")}}),
        },
    )
    assert secrets.keys_of(obj) == ["password", "user"]
    assert secrets.shown_labels(obj) == {"app": "db"}
    assert secrets.shown_annotations(obj) == {"note": "n"}
    assert secrets.description_of(obj) == "the db"
    labels, annotations = secrets.kept_metadata(obj)
    assert labels == {names.LABEL_PROJECT_SECRET: "p-a"}
    assert annotations == {}  # the description is written anew; kubectl's copy is dropped


def test_copies_and_the_clusters_bookkeeping_are_not_namespaced_secrets() -> None:
    assert secrets.is_namespaced_secret(stored())
    assert not secrets.is_namespaced_secret(stored(labels={names.LABEL_SECRET_COPY: "p-a"}))
    for kind in secrets.HIDDEN_TYPES:
        assert not secrets.is_namespaced_secret({**stored(), "type": kind})


def test_a_project_secret_is_kept_in_svc_system_under_a_name_derived_from_what_it_is() -> None:
    spec = secrets.SecretSpec(kind="Opaque", data={"k": b64("v")}, labels={"app": "db"})
    long_name = "d" * 253
    body = secrets.project_secret("c-1", "p-a", long_name, spec, {names.ANNOTATION_CREATOR: "u"})
    meta = body["metadata"]
    assert meta["namespace"] == names.SYSTEM_NAMESPACE == "svc-system"
    assert meta["name"] == secrets.stored_name("c-1", "p-a", long_name)
    assert meta["name"].startswith("project-secret-") and len(meta["name"]) == 31
    assert meta["labels"] == {"app": "db", **secrets.project_secret_labels("c-1", "p-a")}
    assert meta["annotations"][names.ANNOTATION_SECRET_NAME] == long_name
    assert secrets.name_of(body) == long_name
    assert secrets.source_project(body) == ("c-1", "p-a")
    # The same name of another project or cluster, or another name, is stored elsewhere.
    others = {
        secrets.stored_name(c, p, n)
        for c, p, n in [("c-1", "p-b", "db"), ("c-2", "p-a", "db"), ("c-1", "p-a", "db2")]
    }
    assert len(others | {secrets.stored_name("c-1", "p-a", "db")}) == 4
    # What an API server responds with must not show corral's annotation as the user's.
    assert secrets.shown_annotations(body) == {}


def test_a_project_secret_counts_only_as_the_api_stores_it() -> None:
    body = secrets.project_secret("c-1", "p-a", "db", secrets.SecretSpec("Opaque", {}), {})
    assert secrets.source_project(body) == ("c-1", "p-a")

    def changed(**meta: Any) -> dict[str, Any]:
        return {**body, "metadata": {**body["metadata"], **meta}}

    relabelled = {**body["metadata"]["labels"], names.LABEL_PROJECT_SECRET: "p-b"}
    for moved in (
        changed(namespace="c-1-p-a"),  # in another namespace
        changed(labels=relabelled),  # pointed at another project
        changed(annotations={names.ANNOTATION_SECRET_NAME: "other"}),  # renamed
        changed(annotations={}),  # no name
        changed(labels={}),  # no project
    ):
        assert secrets.source_project(moved) is None, moved["metadata"]


# -- copies downstream ------------------------------------------------------------------------


def namespace(name: str, project: str | None) -> dict[str, Any]:
    annotations = {names.ANNOTATION_PROJECT: project} if project else {}
    return {"metadata": {"name": name, "annotations": annotations}, "status": {"phase": "Active"}}


def source(name: str = "db", version: str = "7", **extra: Any) -> dict[str, Any]:
    obj = stored(
        name=secrets.stored_name("c-1", "p-a", name),
        namespace=names.SYSTEM_NAMESPACE,
        resourceVersion=version,
        labels={**secrets.project_secret_labels("c-1", "p-a"), "app": "db"},
        annotations={
            names.ANNOTATION_DESCRIPTION: "the db",
            names.ANNOTATION_CREATOR: "u-1",
            names.ANNOTATION_SECRET_NAME: name,
        },
    )
    obj.update(extra)
    return obj


def wanted(*namespaces: dict[str, Any], sources: list[dict[str, Any]] | None = None) -> Any:
    return downstream.desired(
        "c-1",
        namespaces,
        {"p-a": ProjectView("p-a"), "p-b": ProjectView("p-b")},
        [],
        [],
        False,
        {"p-a": [source()] if sources is None else sources},
    )


def secrets_in(found: dict[downstream.Key, dict[str, Any]]) -> dict[downstream.Key, Any]:
    return {key: manifest for key, manifest in found.items() if key[0] == "Secret"}


def test_every_active_namespace_of_the_project_gets_a_copy() -> None:
    gone = namespace("a3", "c-1:p-a")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    found = secrets_in(
        wanted(
            namespace("a1", "c-1:p-a"),
            namespace("a2", "c-1:p-a"),
            gone,
            namespace("b1", "c-1:p-b"),
            namespace("loose", None),
            namespace("other", "c-2:p-a"),
        )
    )
    assert sorted(found) == [("Secret", "a1", "db"), ("Secret", "a2", "db")]
    copy = found[("Secret", "a1", "db")]
    assert copy["type"] == "Opaque" and copy["data"] == source()["data"]
    assert copy["metadata"]["namespace"] == "a1"
    assert copy["metadata"]["labels"] == {
        "app": "db",
        names.LABEL_MANAGED_BY: names.MANAGED_BY,
        names.LABEL_PROJECT: "p-a",
        names.LABEL_SECRET_COPY: "p-a",
    }
    assert copy["metadata"]["annotations"] == {
        names.ANNOTATION_SECRET_SOURCE: "u-1/7",
        names.ANNOTATION_DESCRIPTION: "the db",
    }


def test_a_copy_carries_no_hash_of_the_data() -> None:
    copy = secrets_in(wanted(namespace("a1", "c-1:p-a")))[("Secret", "a1", "db")]
    text = json.dumps(copy["metadata"])
    raw = b"".join(base64.b64decode(v) for v in copy["data"].values())
    for value in [raw, b"hunter2", *(base64.b64decode(v) for v in copy["data"].values())]:
        for algorithm in ("sha256", "sha1", "md5", "sha512"):
            digest = hashlib.new(algorithm, value).hexdigest()
            assert digest[:16] not in text
    assert downstream.ANNOTATION_HASH not in copy["metadata"]["annotations"]


def test_copies_are_compared_by_their_sources_version() -> None:
    before = wanted(namespace("a1", "c-1:p-a"))
    existing = {key: dict(manifest) for key, manifest in before.items()}
    assert downstream.differences(before, existing) == ([], [])
    # Data that changes changes the source's resourceVersion, and the copy is stale.
    changed = wanted(namespace("a1", "c-1:p-a"), sources=[source(version="8")])
    assert downstream.differences(changed, existing)[0] == [("Secret", "a1", "db")]
    assert downstream.pending_by_project(changed, existing) == {"p-a": {"Secret": 1}}
    # Deleted, or its namespace gone from the project: the copy is unwanted.
    assert downstream.differences(wanted(namespace("a1", "c-1:p-a"), sources=[]), existing)[1] == [
        ("Secret", "a1", "db")
    ]
    left = wanted(namespace("a1", "c-1:p-b"))
    assert ("Secret", "a1", "db") in downstream.differences(left, existing)[1]
