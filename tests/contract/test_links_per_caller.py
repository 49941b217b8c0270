"""What a resource offers depends on who asks: an owner is given the `update` and `remove`
links and the actions their writes would accept, and each of them works; a read-only member
is given none of them, and a write they force is still refused (403). The Default project
offers no `remove`, as its deletion is refused (422).

Each family is read by both callers at once, so that an answer which stopped depending on
the caller (everyone given every link, or no one) fails here.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.core.api import ids, names
from corral.core.kube import kinds
from corral.core.projects import defaults

from .client import Api, eventually
from .conftest import EXTERNAL_URL, Person, write_user

WRITES = {"update", "remove"}


@dataclass(frozen=True)
class Team:
    """A cluster of this module's own, its owner, and a member who reads only: a
    cluster-member, read-only in the project."""

    cluster: str
    project: str
    owner: Person
    reader: Person


def local(url: str) -> str:
    assert url.startswith(EXTERNAL_URL), url
    return url.removeprefix(EXTERNAL_URL)


async def granted(admin: Person, path: str, body: dict[str, Any]) -> dict[str, Any]:
    made = await admin.api.post(path, body)
    assert made.status == 201, made.body
    return dict(made.body)


async def shown(api: Api, path: str) -> dict[str, Any]:
    answer = await api.get(path)
    assert answer.status == 200, answer.body
    return dict(answer.body)


def writes(resource: dict[str, Any]) -> set[str]:
    """The write links a resource offers."""
    return WRITES & set(resource["links"])


def refused(answer: Any) -> None:
    assert answer.status == 403, answer.body
    assert answer.body["code"] == "PermissionDenied", answer.body


@pytest.fixture(scope="module")
async def team(
    admin: Person,
    kube: AsyncClient,
    core: k8s.CoreV1Api,
    anonymous: Api,
) -> Team:
    # An imported cluster as the operator leaves one it cannot reach, with its namespace.
    cluster = ids.generate("c")
    meta = ObjectMeta(name=cluster)
    await kube.create(
        kinds.Cluster(metadata=meta, spec={"displayName": "links", "driver": "imported"})
    )
    with contextlib.suppress(k8s.ApiException):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=cluster)))

    async def seen() -> bool:
        return (await admin.api.get(f"/v3/clusters/{cluster}")).status == 200

    await eventually(f"the app to see cluster {cluster}", seen)
    owner, reader = await write_user(kube, anonymous), await write_user(kube, anonymous)
    for person, role in ((owner, "cluster-owner"), (reader, "cluster-member")):
        grant = {"clusterId": cluster, "userId": person.id, "roleTemplateId": role}
        await granted(admin, "/v3/clusterroletemplatebindings", grant)
    # The cluster's owner makes the project, and so owns it.
    project = await granted(owner, "/v3/projects", {"name": "links", "clusterId": cluster})
    await granted(admin, "/v3/projectroletemplatebindings",
                  {"projectId": project["id"], "userId": reader.id,
                   "roleTemplateId": "read-only"})  # fmt: skip
    return Team(cluster, project["id"], owner, reader)


async def test_a_cluster_offers_its_writes_to_its_owner_only(team: Team) -> None:
    path = f"/v3/clusters/{team.cluster}"
    mine, theirs = await shown(team.owner.api, path), await shown(team.reader.api, path)
    assert (writes(mine), writes(theirs)) == (WRITES, set())
    # An imported cluster's etcd and certificates are not corral's: those actions are no one's.
    assert set(mine["actions"]) == set(theirs["actions"]) == {"generateKubeconfig"}
    listed = await shown(team.reader.api, "/v3/clusters")
    assert not writes(next(c for c in listed["data"] if c["id"] == team.cluster))
    assert listed["createTypes"] == {}

    refused(await team.reader.api.put(path, {"description": "mine now"}))
    refused(await team.reader.api.delete(path))
    action = local(theirs["actions"]["generateKubeconfig"])
    assert (await team.reader.api.post(action, {})).status == 200
    changed = await team.owner.api.put(local(mine["links"]["update"]), {"description": "ours"})
    assert changed.status == 200, changed.body
    assert changed.body["description"] == "ours"


async def test_the_local_cluster_offers_no_remove_even_to_an_administrator(
    admin: Person,
) -> None:
    local_cluster = await shown(admin.api, f"/v3/clusters/{names.LOCAL_CLUSTER}")
    assert "update" in local_cluster["links"] and "remove" not in local_cluster["links"]
    answer = await admin.api.delete(f"/v3/clusters/{names.LOCAL_CLUSTER}")
    assert answer.status == 405, answer.body


async def test_a_node_offers_changes_and_cordoning_to_the_clusters_owner_only(
    team: Team, kube: AsyncClient
) -> None:
    # A pool's machine as the operator records one: removing it removes the record.
    hostname = f"links-{secrets.token_hex(3)}"
    name = names.node_cr_name(hostname)
    spec = {"requestedHostname": hostname, "nodePoolName": f"{team.cluster}:np-links",
            "worker": True, "etcd": False, "controlPlane": False}  # fmt: skip
    await kube.create(kinds.Node(metadata=ObjectMeta(name=name, namespace=team.cluster), spec=spec))
    path = f"/v3/clusters/{team.cluster}/nodes/{name}"

    async def listed() -> bool:
        return (await team.owner.api.get(path)).status == 200

    await eventually("the app to see the node", listed)
    mine, theirs = await shown(team.owner.api, path), await shown(team.reader.api, path)
    assert (writes(mine), writes(theirs)) == (WRITES, set())
    assert set(mine["actions"]) == {"cordon", "uncordon", "drain"}
    assert theirs["actions"] == {}
    collection = await shown(team.reader.api, f"/v3/clusters/{team.cluster}/nodes")
    assert collection["createTypes"] == {}
    assert (await shown(team.owner.api, f"/v3/clusters/{team.cluster}/nodes"))["createTypes"]

    refused(await team.reader.api.post(f"{path}?action=cordon", {}))
    refused(await team.reader.api.put(path, {"description": "mine"}))
    refused(await team.reader.api.delete(path))
    cordoned = await team.owner.api.post(local(mine["actions"]["cordon"]), {})
    assert cordoned.status == 200, cordoned.body
    assert cordoned.body["spec"]["desiredNodeUnschedulable"] == "true"
    changed = await team.owner.api.put(local(mine["links"]["update"]), {"description": "ours"})
    assert changed.status == 200, changed.body
    assert (await team.owner.api.delete(local(mine["links"]["remove"]))).status == 204


async def test_a_project_offers_its_writes_to_its_owners_and_the_default_project_no_remove(
    team: Team, kube: AsyncClient
) -> None:
    path = f"/v3/projects/{team.project}"
    mine, theirs = await shown(team.owner.api, path), await shown(team.reader.api, path)
    assert (writes(mine), writes(theirs)) == (WRITES, set())
    refused(await team.reader.api.put(path, {"description": "mine"}))
    refused(await team.reader.api.delete(path))

    # The Default project, as the operator makes it once the cluster is Ready.
    default = defaults.project_name(team.cluster, defaults.DEFAULT)
    await kube.create(kinds.Project(
        metadata=ObjectMeta(name=default, namespace=team.cluster,
                            labels={defaults.LABEL_ROLE: defaults.DEFAULT.lower()}),
        spec={"displayName": defaults.DEFAULT, "clusterName": team.cluster},
    ))  # fmt: skip
    default_path = f"/v3/projects/{team.cluster}:{default}"

    async def seen() -> dict[str, Any] | None:
        answer = await team.owner.api.get(default_path)
        return dict(answer.body) if answer.status == 200 else None

    kept = await eventually("the app to see the Default project", seen)
    assert "update" in kept["links"] and "remove" not in kept["links"]
    answer = await team.owner.api.delete(default_path)
    assert (answer.status, answer.body["code"]) == (422, "InvalidAction"), answer.body

    changed = await team.owner.api.put(local(mine["links"]["update"]), {"description": "ours"})
    assert changed.status == 200, changed.body
    # Its role bindings: the owner revokes, the reader sees them and revokes none.
    bindings = f"/v3/projectroletemplatebindings?projectId={team.project}"
    for binding in (await shown(team.reader.api, bindings))["data"]:
        assert "remove" not in binding["links"]
        refused(await team.reader.api.delete(local(binding["links"]["self"])))
    reader_binding = next(
        b for b in (await shown(team.owner.api, bindings))["data"] if b["userId"] == team.reader.id
    )
    assert (await team.owner.api.delete(local(reader_binding["links"]["remove"]))).status == 204
    assert (await team.reader.api.get(path)).status == 404
    assert (await team.owner.api.delete(local(mine["links"]["remove"]))).status == 204


async def test_cluster_role_bindings_offer_remove_to_the_clusters_owner_only(team: Team) -> None:
    path = f"/v3/clusterroletemplatebindings?clusterId={team.cluster}"
    theirs = (await shown(team.reader.api, path))["data"]
    mine = (await shown(team.owner.api, path))["data"]
    assert {b["id"] for b in theirs} == {b["id"] for b in mine}
    assert all("remove" in b["links"] for b in mine)
    for binding in theirs:
        assert "remove" not in binding["links"]
        refused(await team.reader.api.delete(local(binding["links"]["self"])))


async def test_a_workload_offers_its_writes_and_actions_to_project_members_not_readers(
    admin: Person,
    core: k8s.CoreV1Api,
    make_user: Callable[..., Awaitable[Person]],
) -> None:
    project = await granted(admin, "/v3/projects", {"name": "links", "clusterId": "local"})
    namespace = f"links-{secrets.token_hex(3)}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(
        name=namespace, annotations={names.ANNOTATION_PROJECT: project["id"]},
    )))  # fmt: skip
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    reader = await make_user()
    await granted(admin, "/v3/projectroletemplatebindings",
                  {"projectId": project["id"], "userId": reader.id,
                   "roleTemplateId": "read-only"})  # fmt: skip
    workloads = f"/v3/projects/{project['id']}/workloads"
    made = await granted(admin, workloads, {
        "name": "links", "namespaceId": namespace,
        "containers": [{"name": "app", "image": "registry.example/app:1.0"}],
    })  # fmt: skip
    path = f"{workloads}/{made['id']}"

    async def theirs_now() -> dict[str, Any] | None:
        answer = await reader.api.get(path)
        return dict(answer.body) if answer.status == 200 else None

    theirs = await eventually("the reader to see the workload", theirs_now)
    mine = await shown(admin.api, path)
    assert (writes(mine), writes(theirs)) == (WRITES, set())
    assert set(mine["actions"]) == {"pause", "resume", "redeploy", "rollback"}
    assert theirs["actions"] == {}
    assert (await shown(reader.api, workloads))["createTypes"] == {}

    refused(await reader.api.post(f"{path}?action=redeploy", {}))
    refused(await reader.api.put(path, {"scale": 3}))
    refused(await reader.api.delete(path))
    paused = await admin.api.post(local(mine["actions"]["pause"]), {})
    assert paused.status == 200, paused.body
    assert paused.body["paused"] is True
    assert (await admin.api.delete(local(mine["links"]["remove"]))).status == 204


async def test_a_session_offers_no_remove_for_its_own_token_and_an_api_token_does(
    admin: Person, anonymous: Api
) -> None:
    password = secrets.token_urlsafe(16)
    user = await granted(admin, "/v3/users", {"username": f"links-{secrets.token_hex(3)}",
                                              "password": password})  # fmt: skip
    login = await anonymous.post("/v3-public/localProviders/local?action=login",
                                 {"username": user["username"], "password": password})  # fmt: skip
    assert login.status == 201, login.body
    session = anonymous.as_token(login.body["token"])
    made = await session.post("/v3/tokens", {"description": "links"})
    assert made.status == 201, made.body
    listed = {t["id"]: t for t in (await shown(session, "/v3/tokens"))["data"]}
    current = next(t for t in listed.values() if t["current"])
    assert "remove" not in current["links"]
    answer = await session.delete(local(current["links"]["self"]))
    assert (answer.status, answer.body["code"]) == (400, "InvalidAction"), answer.body
    # A token's rendering is kept per version of its object; what a caller is offered is not
    # carried to another: the user's other session may end this one, this one itself not.
    again = await anonymous.post("/v3-public/localProviders/local?action=login",
                                 {"username": user["username"], "password": password})  # fmt: skip
    other = anonymous.as_token(again.body["token"])
    path = local(current["links"]["self"])
    for api, removable in ((other, True), (session, False), (other, True)):
        seen = await api.get(path)
        assert seen.status == 200, seen.body
        assert ("remove" in seen.body["links"]) is removable, (api, seen.body["links"])
    api_token = listed[made.body["id"]]
    assert "remove" in api_token["links"]
    assert (await session.delete(local(api_token["links"]["remove"]))).status == 204
