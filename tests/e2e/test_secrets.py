"""Project secrets and namespaced secrets through /v3, checked in the management and downstream
clusters with the official client: copies follow the project's namespaces, a Secret of
someone else's is left alone, data never comes back, and each role gets exactly its access."""

from __future__ import annotations

import base64
import json
import secrets
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.projects import secrets as project_secrets
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api, Response
from .conftest import Person, new_person

PASSWORD = "hunter2-" + secrets.token_hex(4)
USER = "app-user-" + secrets.token_hex(4)
COPY_LABEL = "management.svc.io/project-secret-copy"
SYSTEM = "svc-system"
NAME_ANNOTATION = "management.svc.io/secret-name"
COPY_TIMEOUT = 30


def b64(text: str | bytes) -> str:
    return base64.b64encode(text.encode() if isinstance(text, str) else text).decode()


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def core(downstream: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(downstream)


def project(api: Api, cluster: str) -> tuple[str, str]:
    """(id, name) of a new project."""
    created = api.post("/v3/projects", {"name": unique("sec"), "clusterId": cluster})
    assert created.status == 201, created.body
    return created.body["id"], created.body["id"].split(":")[1]


def namespace(api: Api, cluster: str, pid: str | None) -> str:
    created = api.post(
        f"/v3/clusters/{cluster}/namespaces", {"name": unique("ns"), "projectId": pid}
    )
    assert created.status == 201, created.body
    return str(created.body["name"])


def shows_no_data(response: Response, *values: str) -> Response:
    """Nothing of a secret's data in the response: no `data` or `stringData` field in any
    resource, none of `values` (nor their base64) anywhere in it."""
    text = json.dumps(response.body)
    for value in (PASSWORD, *values):
        assert value not in text and b64(value) not in text
    body = response.body
    for item in body["data"] if body.get("type") == "collection" else [body]:
        assert "data" not in item and "stringData" not in item, item
    return response


def secret_of(core: k8s.CoreV1Api, namespace: str, name: str) -> k8s.V1Secret | None:
    try:
        return core.read_namespaced_secret(name, namespace)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def decoded(secret: k8s.V1Secret | None) -> dict[str, str] | None:
    if secret is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def copies(core: k8s.CoreV1Api, namespaces: list[str], name: str) -> dict[str, Any]:
    return {ns: decoded(secret_of(core, ns, name)) for ns in namespaces}


def stored(management: k8s.ApiClient, cluster: str, project: str) -> dict[str, k8s.V1Secret]:
    """The project's secrets as the management cluster holds them, by their `/v3` name: in
    svc-system, selected by the labels of their cluster and project."""
    selector = f"management.svc.io/cluster={cluster},management.svc.io/project-secret={project}"
    found = k8s.CoreV1Api(management).list_namespaced_secret(SYSTEM, label_selector=selector)
    return {s.metadata.annotations[NAME_ANNOTATION]: s for s in found.items}


# -- project secrets ----------------------------------------------------------------------------


def test_a_project_secret_is_copied_into_its_namespaces_and_follows_them(
    api: Api, cluster: str, core: k8s.CoreV1Api, management: k8s.ApiClient
) -> None:
    pid, name = project(api, cluster)
    other, _ = project(api, cluster)
    first, second = namespace(api, cluster, pid), namespace(api, cluster, pid)
    elsewhere = namespace(api, cluster, other)
    secrets_url = f"/v3/projects/{pid}/secrets"

    created = shows_no_data(
        api.post(
            secrets_url,
            {
                "type": "secret",
                "name": "db",
                "data": {"password": b64(PASSWORD)},
                "stringData": {"user": USER},
                "labels": {"app": "db"},
                "description": "the database",
            },
        ),
        USER,
    )
    assert created.status == 201, created.body
    body = created.body
    assert (body["id"], body["type"], body["kind"]) == (f"{name}:db", "secret", "Opaque")
    assert body["keys"] == ["password", "user"] and body["namespaceId"] is None
    assert (body["labels"], body["description"], body["projectId"]) == (
        {"app": "db"},
        "the database",
        pid,
    )
    assert body["links"]["self"].endswith(f"{secrets_url}/{name}:db")
    # Stored in svc-system of the management cluster, and nowhere else there.
    kept = stored(management, cluster, name)
    assert list(kept) == ["db"] and decoded(kept["db"]) == {"password": PASSWORD, "user": USER}
    assert kept["db"].metadata.name != "db"  # a name derived from cluster, project and name
    assert k8s.CoreV1Api(management).list_namespaced_secret(f"{cluster}-{name}").items == []
    # The same name again races on that stored name: Kubernetes refuses the second.
    again = api.post(secrets_url, {"name": "db", "stringData": {"other": "value"}})
    assert (again.status, again.body["code"]) == (409, "AlreadyExists")
    assert decoded(stored(management, cluster, name)["db"]) == decoded(kept["db"])

    want = {"password": PASSWORD, "user": USER}
    wait_for(
        "copies in both namespaces",
        lambda: copies(core, [first, second], "db") == {first: want, second: want},
        COPY_TIMEOUT,
    )
    copy = core.read_namespaced_secret("db", first)
    assert copy.metadata.labels[COPY_LABEL] == name and copy.metadata.labels["app"] == "db"
    assert secret_of(core, elsewhere, "db") is None

    # A new namespace of the project gets one; a namespace that leaves loses its copy.
    third = namespace(api, cluster, pid)
    wait_for("a copy in the new namespace", lambda: decoded(secret_of(core, third, "db")) == want,
             COPY_TIMEOUT)  # fmt: skip
    moved = api.put(f"/v3/clusters/{cluster}/namespaces/{first}", {"projectId": other})
    assert moved.status == 200, moved.body
    wait_for("the copy gone with the namespace", lambda: secret_of(core, first, "db") is None,
             COPY_TIMEOUT)  # fmt: skip

    # An update replaces the data given (user goes) and keeps the rest; copies follow.
    updated = shows_no_data(
        api.put(f"{secrets_url}/{name}:db", {"data": {"password": b64("changed")}}), "changed"
    )
    assert updated.status == 200, updated.body
    assert updated.body["keys"] == ["password"] and updated.body["labels"] == {"app": "db"}
    assert updated.body["description"] == "the database"
    wait_for(
        "copies updated",
        lambda: (
            copies(core, [second, third], "db")
            == {second: {"password": "changed"}, third: {"password": "changed"}}
        ),
        COPY_TIMEOUT,
    )

    # A pod can take a value from it; kwok runs it.
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="uses-db"),
        spec=k8s.V1PodSpec(
            containers=[
                k8s.V1Container(
                    name="app",
                    image="busybox",
                    env=[
                        k8s.V1EnvVar(
                            name="DB_PASSWORD",
                            value_from=k8s.V1EnvVarSource(
                                secret_key_ref=k8s.V1SecretKeySelector(name="db", key="password")
                            ),
                        )
                    ],
                )
            ]
        ),
    )
    core.create_namespaced_pod(second, pod)
    wait_for(
        "the pod running",
        lambda: core.read_namespaced_pod("uses-db", second).status.phase == "Running",
        60,
    )

    listed = shows_no_data(api.get(secrets_url), "changed")
    assert [s["id"] for s in listed.body["data"]] == [f"{name}:db"]
    assert listed.body["createTypes"] == {"secret": created.body["links"]["self"].rsplit("/", 1)[0]}
    assert api.delete(f"{secrets_url}/{name}:db").status == 204
    wait_for(
        "every copy gone",
        lambda: copies(core, [second, third], "db") == {second: None, third: None},
        COPY_TIMEOUT,
    )
    assert api.get(f"{secrets_url}/{name}:db").status == 404
    assert api.get(secrets_url).body["data"] == []


def test_a_secret_of_someone_elses_is_left_alone_and_reported(
    api: Api, cluster: str, core: k8s.CoreV1Api
) -> None:
    pid, name = project(api, cluster)
    theirs, free = namespace(api, cluster, pid), namespace(api, cluster, pid)
    core.create_namespaced_secret(
        theirs,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="shared"), string_data={"mine": "keep"}),
    )
    url = f"/v3/projects/{pid}/secrets"
    created = api.post(url, {"name": "shared", "stringData": {"password": PASSWORD}})
    assert created.status == 201, created.body

    def reported(times: int) -> bool:
        events = api.get(f"/v3/projects/{pid}/events").body["data"]
        found = [
            e
            for e in events
            if e["reason"] == "SecretNotCopied"
            and theirs in e["message"]
            and "shared" in e["message"]
        ]
        return len(found) >= times and all(e["eventType"] == "Warning" for e in found)

    wait_for("the conflict reported", lambda: reported(1), COPY_TIMEOUT)
    wait_for("the copy in the free namespace",
             lambda: decoded(secret_of(core, free, "shared")) == {"password": PASSWORD},
             COPY_TIMEOUT)  # fmt: skip
    left = core.read_namespaced_secret("shared", theirs)
    assert decoded(left) == {"mine": "keep"} and COPY_LABEL not in (left.metadata.labels or {})

    # Deleting the project secret removes corral's copies only.
    assert api.delete(f"{url}/{name}:shared").status == 204
    wait_for("the copy gone", lambda: secret_of(core, free, "shared") is None, COPY_TIMEOUT)
    assert decoded(secret_of(core, theirs, "shared")) == {"mine": "keep"}

    # Once their Secret is gone, the copy lands: their Secret is watched by its name, so the
    # copy does not wait for the retry once a minute (the last try was just now, when the
    # conflict was reported).
    assert api.post(url, {"name": "shared", "stringData": {"password": PASSWORD}}).status == 201
    wait_for("reported again", lambda: reported(2), COPY_TIMEOUT)
    core.delete_namespaced_secret("shared", theirs)
    wait_for("the copy where their Secret was",
             lambda: decoded(secret_of(core, theirs, "shared")) == {"password": PASSWORD},
             COPY_TIMEOUT)  # fmt: skip


def test_deleting_a_project_deletes_its_secrets(
    api: Api, cluster: str, core: k8s.CoreV1Api, management: k8s.ApiClient
) -> None:
    pid, name = project(api, cluster)
    other, other_name = project(api, cluster)
    ns = namespace(api, cluster, pid)
    for owner, secret in ((pid, "db"), (pid, "api-key"), (other, "db")):
        made = api.post(f"/v3/projects/{owner}/secrets", {"name": secret, "stringData": {"k": "v"}})
        assert made.status == 201, made.body
    assert sorted(stored(management, cluster, name)) == ["api-key", "db"]
    wait_for("a copy", lambda: secret_of(core, ns, "api-key") is not None, COPY_TIMEOUT)

    assert api.delete(f"/v3/projects/{pid}").status == 204
    wait_for("its secrets gone", lambda: stored(management, cluster, name) == {}, 60)
    wait_for("the project gone", lambda: api.get(f"/v3/projects/{pid}").status == 404, 60)
    assert list(stored(management, cluster, other_name)) == ["db"]
    assert api.get(f"/v3/projects/{other}/secrets/{other_name}:db").status == 200


def test_a_secret_stored_for_a_project_that_is_gone_is_removed(
    cluster: str, management: k8s.ApiClient
) -> None:
    # What an API server that still saw a project being deleted stores after the operator's
    # deletion handler has looked: the project's keeper removes it.
    gone = "p-" + secrets.token_hex(3)
    late = k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(
            name=project_secrets.stored_name(cluster, gone, "late"),
            labels={"management.svc.io/cluster": cluster, "management.svc.io/project-secret": gone},
            annotations={NAME_ANNOTATION: "late"},
        ),
        string_data={"k": PASSWORD},
    )
    k8s.CoreV1Api(management).create_namespaced_secret(SYSTEM, late)
    wait_for("the late secret removed", lambda: stored(management, cluster, gone) == {}, 30)


def test_projects_of_local_have_no_project_secrets(api: Api, management: k8s.ApiClient) -> None:
    pid, name = project(api, "local")
    url = f"/v3/projects/{pid}/secrets"
    refused = api.post(url, {"name": "db", "stringData": {"k": PASSWORD}})
    assert (refused.status, refused.body["code"], refused.body["fieldName"]) == (
        422,
        "InvalidState",
        "projectId",
    )
    assert stored(management, "local", name) == {} and api.get(url).body["data"] == []
    assert api.delete(f"/v3/projects/{pid}").status == 204


# -- namespaced secrets -------------------------------------------------------------------------


TLS = {"tls.crt": b64("certificate"), "tls.key": b64(PASSWORD)}


def test_namespaced_secrets_live_in_one_namespace_of_the_project(
    api: Api, cluster: str, core: k8s.CoreV1Api
) -> None:
    pid, _ = project(api, cluster)
    other, _ = project(api, cluster)
    ns, second = namespace(api, cluster, pid), namespace(api, cluster, pid)
    elsewhere = namespace(api, cluster, other)
    url = f"/v3/projects/{pid}/namespacedSecrets"
    body = {"type": "namespacedSecret", "name": "web-tls", "namespaceId": ns,
            "kind": "kubernetes.io/tls", "data": TLS}  # fmt: skip

    created = shows_no_data(api.post(url, body))
    assert created.status == 201, created.body
    assert (created.body["id"], created.body["namespaceId"]) == (f"{ns}:web-tls", ns)
    assert created.body["keys"] == ["tls.crt", "tls.key"]
    stored = core.read_namespaced_secret("web-tls", ns)
    assert stored.type == "kubernetes.io/tls" and decoded(stored)["tls.key"] == PASSWORD
    again = api.post(url, body)
    assert (again.status, again.body["code"]) == (409, "AlreadyExists")

    # Only into the project's namespaces.
    for target in (elsewhere, "kube-system", "no-such-namespace"):
        refused = api.post(url, {**body, "namespaceId": target})
        assert (refused.status, refused.body["fieldName"]) == (422, "namespaceId"), target
    assert secret_of(core, elsewhere, "web-tls") is None
    assert secret_of(core, "kube-system", "web-tls") is None

    # Listed with what kubectl made, without copies of project secrets or tokens.
    core.create_namespaced_secret(
        second, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="by-kubectl"), string_data={"k": "v"})
    )
    core.create_namespaced_secret(
        second,
        k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(
                name="sa-token", annotations={"kubernetes.io/service-account.name": "default"}
            ),
            type="kubernetes.io/service-account-token",
        ),
    )
    shared = {"name": "shared-db", "data": {"p": b64(PASSWORD)}}
    assert api.post(f"/v3/projects/{pid}/secrets", shared).status == 201
    wait_for("the project secret's copies", lambda: secret_of(core, ns, "shared-db"), COPY_TIMEOUT)
    listed = shows_no_data(api.get(url))
    assert sorted(s["id"] for s in listed.body["data"]) == sorted(
        [f"{second}:by-kubectl", f"{ns}:web-tls"]
    )
    only = api.get(f"{url}?namespaceId={ns}").body["data"]
    assert [s["id"] for s in only] == [f"{ns}:web-tls"]
    assert api.get(f"{url}/{ns}:shared-db").status == 404
    assert api.get(f"{url}/{second}:sa-token").status == 404
    assert api.get(f"{url}/{elsewhere}:web-tls").status == 404

    # An update keeps what it is not given; the kind cannot change.
    updated = shows_no_data(api.put(f"{url}/{ns}:web-tls", {"stringData": {"ca.crt": "ca"}}))
    assert updated.status == 200, updated.body
    assert updated.body["keys"] == ["ca.crt", "tls.crt", "tls.key"]
    assert decoded(core.read_namespaced_secret("web-tls", ns))["ca.crt"] == "ca"
    refused = api.put(f"{url}/{ns}:web-tls", {"kind": "Opaque", "data": {"x": b64("y")}})
    assert (refused.status, refused.body["fieldName"]) == (422, "kind")
    assert sorted(core.read_namespaced_secret("web-tls", ns).data) == [
        "ca.crt",
        "tls.crt",
        "tls.key",
    ]

    got = shows_no_data(api.get(f"{url}/{ns}:web-tls"))
    assert got.body["kind"] == "kubernetes.io/tls" and got.body["projectId"] == pid
    assert api.delete(f"{url}/{ns}:web-tls").status == 204
    assert secret_of(core, ns, "web-tls") is None
    assert api.get(f"{url}/{ns}:web-tls").status == 404


# -- access -------------------------------------------------------------------------------------


@dataclass
class Team:
    project: str
    name: str
    namespace: str
    owner: Person
    member: Person
    reader: Person
    outsider: Person


@pytest.fixture(scope="module")
def team(api: Api, cluster: str) -> Team:
    pid, name = project(api, cluster)
    ns = namespace(api, cluster, pid)
    people = {role: new_person(api) for role in ("project-owner", "project-member", "read-only")}
    for role, person in people.items():
        granted = api.post(
            "/v3/projectroletemplatebindings",
            {"projectId": pid, "userId": person.id, "roleTemplateId": role},
        )
        assert granted.status == 201, granted.body
    return Team(pid, name, ns, people["project-owner"], people["project-member"],
                people["read-only"], new_person(api))  # fmt: skip


def test_each_role_gets_exactly_its_access(team: Team, core: k8s.CoreV1Api) -> None:
    project_url = f"/v3/projects/{team.project}/secrets"
    namespaced_url = f"/v3/projects/{team.project}/namespacedSecrets"
    kinds = {
        project_url: (f"{team.name}:", {}),
        namespaced_url: (f"{team.namespace}:", {"namespaceId": team.namespace}),
    }
    for url, (prefix, extra) in kinds.items():
        for person in (team.owner, team.member):
            name = unique("s")
            made = person.api.post(url, {"name": name, "data": {"k": b64(PASSWORD)}, **extra})
            assert made.status == 201, made.body
            changed = person.api.put(f"{url}/{prefix}{name}", {"description": "changed"})
            assert changed.status == 200, changed.body
            assert person.api.delete(f"{url}/{prefix}{name}").status == 204
        kept = unique("kept")
        assert team.member.api.post(url, {"name": kept, "stringData": {"k": PASSWORD},
                                          **extra}).status == 201  # fmt: skip
        item = f"{url}/{prefix}{kept}"

        # Read-only: names and keys, and nothing else.
        reader = team.reader.api
        listed = shows_no_data(reader.get(url))
        assert [s["name"] for s in listed.body["data"]] == [kept]
        assert listed.body["createTypes"] == {}
        got = shows_no_data(reader.get(item))
        assert (got.status, got.body["keys"]) == (200, ["k"])
        for response in (
            reader.post(url, {"name": unique("r"), "stringData": {"k": "v"}, **extra}),
            reader.put(item, {"stringData": {"k": "changed"}}),
            reader.delete(item),
        ):
            assert (response.status, response.body["code"]) == (403, "PermissionDenied")
        assert team.owner.api.get(item).body["keys"] == ["k"]

        # No role: nothing of it exists.
        outsider = team.outsider.api
        for response in (
            outsider.get(url),
            outsider.get(item),
            outsider.post(url, {"name": unique("o"), "stringData": {"k": "v"}, **extra}),
            outsider.put(item, {"stringData": {"k": "changed"}}),
            outsider.delete(item),
        ):
            assert (response.status, response.body["code"]) == (404, "NotFound")
        assert team.owner.api.delete(item).status == 204


# -- bad input ----------------------------------------------------------------------------------


def test_bad_input_is_refused_and_changes_nothing(
    api: Api, cluster: str, core: k8s.CoreV1Api, management: k8s.ApiClient
) -> None:
    pid, name = project(api, cluster)
    ns = namespace(api, cluster, pid)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"data": {"k": b64("v")}}, "name"),
        ({"name": "Bad_Name", "data": {"k": b64("v")}}, "name"),
        ({"name": "x" * 254}, "name"),
        ({"name": "ok", "data": {"a/b": b64("v")}}, "data"),
        ({"name": "ok", "data": {"k": "%%%"}}, "data"),
        ({"name": "ok", "data": {"k": 5}}, "data"),
        ({"name": "ok", "data": ["k"]}, "data"),
        ({"name": "ok", "stringData": {"k": "x" * (1024 * 1024)}}, "data"),
        ({"name": "ok", "kind": "kubernetes.io/service-account-token"}, "kind"),
        ({"name": "ok", "kind": "kubernetes.io/tls", "data": {"tls.crt": b64("c")}}, "data"),
        (
            {
                "name": "ok",
                "kind": "kubernetes.io/dockerconfigjson",
                "stringData": {".dockerconfigjson": "not json"},
            },
            "data",
        ),
        ({"name": "ok", "labels": {"management.svc.io/project-secret": "p-x"}}, "labels"),
        ({"name": "ok", "labels": {"bad key!": "v"}}, "labels"),
        ({"name": "ok", "annotations": "text"}, "annotations"),
        ({"name": "ok", "type": "namespace"}, "type"),
    ]
    urls = {
        f"/v3/projects/{pid}/secrets": {},
        f"/v3/projects/{pid}/namespacedSecrets": {"namespaceId": ns},
    }
    for url, extra in urls.items():
        for body, field in cases:
            refused = api.post(url, {**extra, **body})
            assert (refused.status, refused.body.get("fieldName")) == (422, field), (url, body)
            assert PASSWORD not in json.dumps(refused.body)
        assert api.get(url).body["data"] == []
    missing = api.post(f"/v3/projects/{pid}/namespacedSecrets", {"name": "ok"})
    assert (missing.status, missing.body["code"]) == (422, "MissingRequired")
    assert stored(management, cluster, name) == {}
    assert [s.metadata.name for s in core.list_namespaced_secret(ns).items] == []

    # A bad update changes nothing either.
    url = f"/v3/projects/{pid}/secrets"
    assert api.post(url, {"name": "db", "stringData": {"k": PASSWORD}}).status == 201
    for body, field in [
        ({"data": {"k": "%%%"}}, "data"),
        ({"kind": "kubernetes.io/tls"}, "kind"),
        ({"name": "renamed"}, "name"),
        ({"labels": {"field.svc.io/projectId": "x"}}, "labels"),
    ]:
        refused = api.put(f"{url}/{name}:db", body)
        assert (refused.status, refused.body["fieldName"]) == (422, field), body
    kept = stored(management, cluster, name)["db"]
    assert decoded(kept) == {"k": PASSWORD} and kept.type == "Opaque"
    for bad in ("db", "p-other:db", f"{name}:Bad_Name", f"{name}:nothere"):
        assert api.get(f"{url}/{bad}").status == 404, bad
    assert api.get(f"/v3/projects/{cluster}:p-nothere/secrets").status == 404
