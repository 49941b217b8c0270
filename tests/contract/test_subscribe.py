"""`GET /v3/subscribe`: change events over a WebSocket, each only to a caller who may see the
object, the handshake's refusals, and a socket closed when its session ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod, ServiceAccount
from lightkube.types import PatchType

from corral.apiserver.deps import DEPS
from corral.core.api import ids, names
from corral.core.kube import kinds

from .client import error, eventually
from .conftest import EXTERNAL_URL, Person

EVENT_WAIT = 10.0


class Events:
    """What one subscriber's socket received, read in the background."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.seen: list[dict[str, Any]] = []
        self._arrived = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.socket:
            if message.type == aiohttp.WSMsgType.TEXT:
                async with self._arrived:
                    self.seen.append(json.loads(message.data))
                    self._arrived.notify_all()

    async def first(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event `match` accepts, awaited."""
        async with asyncio.timeout(EVENT_WAIT), self._arrived:
            await self._arrived.wait_for(lambda: any(match(e) for e in self.seen))
        return next(e for e in self.seen if match(e))

    def about(self, cluster_id: str) -> list[dict[str, Any]]:
        return [e for e in self.seen if (e.get("data") or {}).get("id") == cluster_id]

    async def closed(self) -> int | None:
        async with asyncio.timeout(EVENT_WAIT):
            await self._reader
        return self.socket.close_code


@asynccontextmanager
async def subscribed(
    client: TestClient[Any, Any], person: Person, query: str = "resourceTypes=cluster"
) -> AsyncIterator[Events]:
    headers = {"Authorization": f"Bearer {person.api.token}"}
    async with client.ws_connect(f"/v3/subscribe?{query}", headers=headers) as socket:
        events = Events(socket)
        yield events


async def new_cluster(kube: AsyncClient, name: str) -> str:
    cluster_id = ids.generate("c")
    spec = {"displayName": name, "driver": "imported"}
    await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id), spec=spec))
    return cluster_id


async def describe(kube: AsyncClient, cluster_id: str, text: str) -> None:
    await kube.patch(kinds.Cluster, cluster_id, {"spec": {"description": text}},
                     patch_type=PatchType.MERGE)  # fmt: skip


async def grant(admin: Person, cluster_id: str, person: Person) -> None:
    made = await admin.api.post("/v3/clusterroletemplatebindings",
                                {"clusterId": cluster_id, "userId": person.id,
                                 "roleTemplateId": "cluster-member"})  # fmt: skip
    assert made.status == 201, made.body


def change_of(cluster_id: str, text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: (
        e["name"] == "resource.change"
        and e["data"]["id"] == cluster_id
        and e["data"]["description"] == text
    )


async def test_a_user_never_receives_an_event_of_a_cluster_hidden_from_them(
    client: TestClient[Any, Any],
    kube: AsyncClient,
    admin: Person,
    make_user: Callable[..., Awaitable[Person]],
) -> None:
    member, other = await make_user(), await make_user()
    async with subscribed(client, member) as theirs, subscribed(client, other) as others:
        hidden = await new_cluster(kube, "hidden-from-other")
        await grant(admin, hidden, member)
        await describe(kube, hidden, "first")
        event = await theirs.first(change_of(hidden, "first"))
        # The resource as GET shows it to the member: the same fields and links.
        shown = (await member.api.get(f"/v3/clusters/{hidden}")).body
        assert event["resourceType"] == "cluster"
        assert event["data"]["links"] == shown["links"]
        assert event["data"]["name"] == shown["name"] == "hidden-from-other"
        await kube.delete(kinds.Cluster, hidden)
        await theirs.first(lambda e: e["name"] == "resource.remove" and e["data"]["id"] == hidden)

        # A cluster of the other user's own, changed after all of the above: once its event
        # is in, every event before it was delivered or withheld.
        own = await new_cluster(kube, "the-others-own")
        await grant(admin, own, other)
        await describe(kube, own, "last")
        await others.first(change_of(own, "last"))
        assert others.about(hidden) == []
        assert theirs.about(own) == []
        await kube.delete(kinds.Cluster, own)


async def test_an_administrator_receives_every_clusters_events_and_filters_by_name(
    client: TestClient[Any, Any], kube: AsyncClient, admin: Person
) -> None:
    query = "resourceTypes=cluster&eventNames=resource.remove"
    async with subscribed(client, admin, query) as removals, subscribed(client, admin) as every:
        cluster_id = await new_cluster(kube, "for-the-admin")
        created = await every.first(lambda e: e["data"]["id"] == cluster_id)
        assert created["name"] == "resource.create"
        await kube.delete(kinds.Cluster, cluster_id)
        removed = await removals.first(lambda e: e["data"]["id"] == cluster_id)
        assert removed["name"] == "resource.remove"
        assert {e["name"] for e in removals.seen} == {"resource.remove"}


async def test_a_change_made_while_the_handshake_waits_is_delivered(
    client: TestClient[Any, Any], kube: AsyncClient, admin: Person, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The subscription starts when the socket is asked for: a change the caches take in
    while the 101 is on its way (a client slow to read pauses the transport, and the
    handshake waits) reaches the socket, as does every change after the client's lists."""
    cluster_id = await new_cluster(kube, "changed-during-the-handshake")
    clusters = client.app[DEPS].stores.clusters

    def described(text: str) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            found = clusters.get(cluster_id)
            return found is not None and (found["spec"].get("description") or "") == text

        return probe

    await eventually("the cluster in the app's cache", described(""))
    handshake = web.WebSocketResponse.prepare

    async def waiting_handshake(self: web.WebSocketResponse, request: web.BaseRequest) -> Any:
        await describe(kube, cluster_id, "during the handshake")
        await eventually("the change in the app's cache", described("during the handshake"))
        return await handshake(self, request)

    monkeypatch.setattr(web.WebSocketResponse, "prepare", waiting_handshake)
    async with subscribed(client, admin) as events:
        await events.first(change_of(cluster_id, "during the handshake"))
    await kube.delete(kinds.Cluster, cluster_id)


async def test_a_binding_removed_stops_the_events_of_its_cluster(
    client: TestClient[Any, Any],
    kube: AsyncClient,
    admin: Person,
    make_user: Callable[..., Awaitable[Person]],
) -> None:
    member = await make_user()
    watched, control = await new_cluster(kube, "revoked"), await new_cluster(kube, "control")
    await grant(admin, control, member)
    binding = (await admin.api.post("/v3/clusterroletemplatebindings",
                                    {"clusterId": watched, "userId": member.id,
                                     "roleTemplateId": "cluster-member"})).body  # fmt: skip
    async with subscribed(client, member) as events:
        await describe(kube, watched, "while bound")
        await events.first(change_of(watched, "while bound"))
        removed = await admin.api.delete(f"/v3/clusterroletemplatebindings/{binding['id']}")
        assert removed.status == 204, removed.body

        async def hidden() -> bool:
            return (await member.api.get(f"/v3/clusters/{watched}")).status == 404

        await eventually("the binding's removal to reach the app", hidden)
        await describe(kube, watched, "after the binding")
        await describe(kube, control, "after the binding")
        await events.first(change_of(control, "after the binding"))
        assert not [e for e in events.about(watched) if e["data"]["description"] != "while bound"]
    for cluster_id in (watched, control):
        await kube.delete(kinds.Cluster, cluster_id)


async def test_a_socket_closes_when_its_session_ends(
    client: TestClient[Any, Any],
    kube: AsyncClient,
    admin: Person,
    make_user: Callable[..., Awaitable[Person]],
) -> None:
    person = await make_user()
    cluster_id = await new_cluster(kube, "seen-until-logout")
    await grant(admin, cluster_id, person)
    async with subscribed(client, person) as events:
        assert person.api.token is not None
        await kube.delete(kinds.Token, person.api.token.split(":")[0])

        async def gone() -> bool:
            return (await person.api.get("/v3/clusters")).status != 200

        await eventually("the token's deletion to reach the app", gone)
        await describe(kube, cluster_id, "after the session")
        assert await events.closed() == aiohttp.WSCloseCode.POLICY_VIOLATION
        assert events.about(cluster_id) == []
    await kube.delete(kinds.Cluster, cluster_id)


@pytest.mark.parametrize(
    ("query", "field"),
    [("resourceTypes=secret", "resourceTypes"), ("eventNames=resource.explode", "eventNames")],
)
async def test_a_type_or_event_not_offered_is_refused_before_the_upgrade(
    admin: Person, query: str, field: str
) -> None:
    headers = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}  # fmt: skip
    error(await admin.api.get(f"/v3/subscribe?{query}", headers=headers), 422, "InvalidOption",
          field)  # fmt: skip


async def test_a_plain_get_is_no_subscription(admin: Person) -> None:
    error(await admin.api.get("/v3/subscribe"), 400, "BadRequest")


async def test_no_credential_is_401(client: TestClient[Any, Any]) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/v3/subscribe")
    assert refused.value.status == 401


async def test_the_session_cookie_opens_it_only_from_corrals_own_origin(
    client: TestClient[Any, Any], admin: Person
) -> None:
    cookie = {"Cookie": f"R_SESS={admin.api.token}"}
    for origin in ({"Origin": "https://evil.example"}, {}):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/v3/subscribe", headers={**cookie, **origin})
        assert refused.value.status == 403
    async with client.ws_connect("/v3/subscribe",
                                 headers={**cookie, "Origin": EXTERNAL_URL}) as socket:  # fmt: skip
        assert not socket.closed


@dataclass(frozen=True)
class Watched:
    """A family's object made for the test: its id, and where `GET` shows it."""

    id: str
    path: str


async def cluster_with_namespace(kube: AsyncClient, core: k8s.CoreV1Api, name: str) -> str:
    cluster_id = await new_cluster(kube, name)
    # The operator makes each cluster's namespace; none runs here.
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=cluster_id)))
    return cluster_id


async def made_node(kube: AsyncClient, cluster_id: str) -> Watched:
    hostname = f"sub-{secrets.token_hex(3)}"
    name = names.node_cr_name(hostname)
    meta = ObjectMeta(name=name, namespace=cluster_id)
    await kube.create(kinds.Node(metadata=meta, spec={"requestedHostname": hostname}))
    return Watched(f"{cluster_id}:{name}", f"/v3/clusters/{cluster_id}/nodes/{name}")


async def made_pool(api: Any, cluster_id: str, template: str) -> Watched:
    body = {"clusterId": cluster_id, "hostnamePrefix": f"sub-{secrets.token_hex(3)}-",
            "nodeTemplateName": template, "quantity": 0, "worker": True}  # fmt: skip
    created = await api.post("/v3/nodepools", body)
    assert created.status == 201, created.body
    return Watched(created.body["id"], f"/v3/nodepools/{created.body['id']}")


async def made_project(api: Any, cluster_id: str) -> Watched:
    created = await api.post("/v3/projects", {"name": "subscribed", "clusterId": cluster_id})
    assert created.status == 201, created.body
    path = f"/v3/projects/{created.body['id']}"
    # The creator's role may reach the app after the project does, and then its create event
    # is withheld from them; a change they make (so the app knows their role) is theirs.
    changed = await api.put(path, {"description": "made"})
    assert changed.status == 200, changed.body
    return Watched(created.body["id"], path)


async def made_binding(
    api: Any, admin: Person, cluster_id: str, grantee: Person, resource_type: str
) -> Watched:
    """A role binding of `grantee` in the cluster, or in a new project of the cluster that
    the caller of `api` makes (and so owns)."""
    if resource_type == "clusterRoleTemplateBinding":
        where, role, path = (
            {"clusterId": cluster_id},
            "cluster-member",
            "clusterroletemplatebindings",
        )
    else:
        project = await made_project(api, cluster_id)
        where, role, path = {"projectId": project.id}, "read-only", "projectroletemplatebindings"
    body = {**where, "userId": grantee.id, "roleTemplateId": role}
    created = await admin.api.post(f"/v3/{path}", body)
    assert created.status == 201, created.body
    return Watched(created.body["id"], f"/v3/{path}/{created.body['id']}")


@pytest.mark.parametrize(
    "resource_type",
    ["node", "nodePool", "project", "projectRoleTemplateBinding", "clusterRoleTemplateBinding"],
)
async def test_a_user_receives_events_of_exactly_the_nodes_pools_and_projects_the_api_shows(
    client: TestClient[Any, Any],
    kube: AsyncClient,
    core: k8s.CoreV1Api,
    admin: Person,
    make_user: Callable[..., Awaitable[Person]],
    resource_type: str,
) -> None:
    """Three users of two clusters: the owner and a member of A, the owner of B. Objects are
    made in A, B, A, B; each user's events are compared with what `GET` shows them. A member
    sees a cluster's nodes, pools and cluster role bindings, but only the projects (and their
    role bindings) they have a role in."""
    first = await cluster_with_namespace(kube, core, "subscribed-a")
    second = await cluster_with_namespace(kube, core, "subscribed-b")
    owner_a, member_a, owner_b = await make_user(), await make_user(), await make_user()
    for cluster_id, person, role in ((first, owner_a, "cluster-owner"),
                                     (first, member_a, "cluster-member"),
                                     (second, owner_b, "cluster-owner")):  # fmt: skip
        granted = await admin.api.post("/v3/clusterroletemplatebindings",
                                       {"clusterId": cluster_id, "userId": person.id,
                                        "roleTemplateId": role})  # fmt: skip
        assert granted.status == 201, granted.body
    template = ""
    if resource_type == "nodePool":
        made = await admin.api.post("/v3/nodetemplates", {"name": "sub", "kwokConfig": {}})
        assert made.status == 201, made.body
        template = made.body["id"]

    async def make(cluster_id: str, creator: Person) -> Watched:
        if resource_type == "node":
            return await made_node(kube, cluster_id)
        if resource_type == "nodePool":
            return await made_pool(admin.api, cluster_id, template)
        if resource_type.endswith("RoleTemplateBinding"):
            # Granted to a new user each time: no one who subscribes, and no grant twice.
            grantee = await make_user()
            return await made_binding(creator.api, admin, cluster_id, grantee, resource_type)
        return await made_project(creator.api, cluster_id)

    query = f"resourceTypes={resource_type}"
    people = (owner_a, member_a, owner_b)
    async with contextlib.AsyncExitStack() as stack:
        streams = [await stack.enter_async_context(subscribed(client, p, query)) for p in people]
        # The member's own project in A comes last in A, so a member who sees no other
        # project of A still has an event to wait for.
        made = [await make(first, admin), await make(second, admin),
                await make(first, member_a), await make(second, admin)]  # fmt: skip
        for person, events in zip(people, streams, strict=True):
            shown = [(await person.api.get(w.path)).status == 200 for w in made]
            # The last object they see: every change before it was delivered or withheld once
            # its event is in (one watch brings this family's changes in order).
            last = max(i for i, seen in enumerate(shown) if seen)
            await events.first(lambda e, w=made[last]: e["data"]["id"] == w.id)
            received = [bool(events.about(w.id)) for w in made[:last]]
            assert received == shown[:last], (person.username, made, received, shown)
            assert not all(shown[:last]), "each user has an object hidden from them before"
            assert {e["resourceType"] for e in events.seen} == {resource_type}


async def project_with_namespace(api: Any) -> tuple[str, str]:
    """A project of `local` and a namespace in it, made by the caller of `api`."""
    made = await api.post("/v3/projects", {"name": "live", "clusterId": "local"})
    assert made.status == 201, made.body
    namespace = f"live-{secrets.token_hex(3)}"
    space = await api.post("/v3/clusters/local/namespaces",
                           {"name": namespace, "projectId": made.body["id"]})  # fmt: skip
    assert space.status == 201, space.body
    return made.body["id"], namespace


def deployment(namespace: str, name: str) -> Deployment:
    labels = {"app": name}
    return Deployment.from_dict({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": "example/web:1"}]}}},
    })  # fmt: skip


def pod(namespace: str, name: str) -> Pod:
    containers = [{"name": "web", "image": "example/web:1"}]
    return Pod.from_dict({"metadata": {"name": name, "namespace": namespace},
                          "spec": {"containers": containers}})  # fmt: skip


async def test_a_user_without_a_role_in_a_project_receives_no_event_of_its_workloads_or_pods(
    client: TestClient[Any, Any],
    kube: AsyncClient,
    admin: Person,
    make_user: Callable[..., Awaitable[Person]],
) -> None:
    """A member of project A and a user with a project B of their own in the same cluster:
    A's workload is made and paused, and a pod made in A, then the same in B. The member gets
    A's events as `GET` shows them; the other user gets B's, and none of A's, which came
    first on the same watch."""
    member, other = await make_user(), await make_user()
    first, first_ns = await project_with_namespace(admin.api)
    granted = await admin.api.post("/v3/projectroletemplatebindings", {
        "projectId": first, "userId": member.id, "roleTemplateId": "project-member"})  # fmt: skip
    assert granted.status == 201, granted.body
    second, second_ns = await project_with_namespace(admin.api)
    granted = await admin.api.post("/v3/projectroletemplatebindings", {
        "projectId": second, "userId": other.id, "roleTemplateId": "project-owner"})  # fmt: skip
    assert granted.status == 201, granted.body
    # Reading them starts the cluster's caches of workloads and pods: events flow from then on.
    for person, pid in ((member, first), (other, second)):
        await eventually("the project's workloads to be readable", lambda p=person, i=pid:
                         _listed(p, f"/v3/projects/{i}/workloads"))  # fmt: skip

    query = "resourceTypes=workload&resourceTypes=pod"
    async with (
        subscribed(client, member, query) as theirs,
        subscribed(client, other, query) as others,
    ):
        for namespace in (first_ns, second_ns):
            await kube.create(deployment(namespace, "web"))
            await kube.patch(Deployment, "web", {"spec": {"paused": True}}, namespace=namespace,
                             patch_type=PatchType.MERGE)  # fmt: skip
            # No controller manager here makes the account a pod is admitted with.
            await kube.create(
                ServiceAccount(metadata=ObjectMeta(name="default", namespace=namespace))
            )
            await kube.create(pod(namespace, "solo"))
        hidden_workload, hidden_pod = f"deployment:{first_ns}:web", f"{first_ns}:solo"

        paused = await theirs.first(lambda e: e["data"]["id"] == hidden_workload
                                    and e["data"].get("paused") is True)  # fmt: skip
        assert paused["resourceType"] == "workload" and paused["name"] == "resource.change"
        assert paused["data"]["state"] == "paused"
        shown = (await member.api.get(f"/v3/projects/{first}/workloads/{hidden_workload}")).body
        assert paused["data"]["links"] == shown["links"]
        assert paused["data"]["actions"] == shown["actions"]
        made = await theirs.first(lambda e: e["data"]["id"] == hidden_pod)
        assert made["resourceType"] == "pod"
        assert made["data"]["links"]["self"].endswith(f"/v3/projects/{first}/pods/{hidden_pod}")

        # B's pod came after everything of A on the same watches: A's would be in by now.
        await others.first(lambda e: e["data"]["id"] == f"{second_ns}:solo")
        await others.first(lambda e: e["data"]["id"] == f"deployment:{second_ns}:web")
        assert not others.about(hidden_workload) and not others.about(hidden_pod)
        assert not [e for e in others.seen if first_ns in e["data"]["id"]]
        assert not [e for e in theirs.seen if second_ns in e["data"]["id"]]
        assert (
            await other.api.get(f"/v3/projects/{first}/workloads/{hidden_workload}")
        ).status == 404


async def _listed(person: Person, path: str) -> bool:
    return (await person.api.get(path)).status == 200
