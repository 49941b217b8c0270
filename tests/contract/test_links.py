"""Every `links` entry of every resource: followed from `GET /v3` (and the `/v1` view) as a
client would, never from a list of its own, so a link a family adds later is checked too.

Each link must resolve (200). A link to a collection must hold only what it names: each filter
in its query is one the collection declares (an undeclared one is ignored, and the link lists
everything) and every item has that value, and the items of a collection under a resource
(a cluster's nodes) that name such a resource name this one.

The world it walks is made as a client and the operator would make it: node pools through
`/v3/nodepools`, their machines' Node CRs as the operator's pool reconciler writes them (no
operator runs in this tier), a project of `local` with a namespace, another without one.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.core.api import ids, names
from corral.core.kube import kinds
from corral.core.provisioning import catalog

from .client import Api, Response, eventually
from .conftest import EXTERNAL_URL, Person

# Query keys of paging and sorting, not filters.
PAGING = {"limit", "marker", "sort", "order"}
# A walk that reaches this many URLs is following something without end.
MAX_URLS = 20000


@dataclass(frozen=True)
class World:
    cluster: str
    pools: dict[str, str]  # pool name -> pool id
    nodes: dict[str, str]  # node id -> pool id ("" for none)
    project: str


async def node(kube: AsyncClient, cluster: str, hostname: str, pool: str, template: str) -> str:
    """A machine's record as the pool reconciler writes it (`nodePoolName`: the pool's id);
    the id of the node it is."""
    name = names.node_cr_name(hostname)
    spec = {"requestedHostname": hostname, "nodePoolName": pool, "nodeTemplateName": template,
            "etcd": False, "controlPlane": False, "worker": True}  # fmt: skip
    await kube.create(kinds.Node(metadata=ObjectMeta(name=name, namespace=cluster), spec=spec))
    return f"{cluster}:{name}"


@pytest.fixture(scope="module")
async def world(admin: Person, cluster: str, kube: AsyncClient, core: k8s.CoreV1Api) -> World:
    # The operator makes each cluster's namespace; none runs here.
    for namespace in (cluster, other := ids.generate("c")):
        with contextlib.suppress(k8s.ApiException):
            core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    made = await admin.api.post("/v3/nodetemplates", {"name": "links", "kwokConfig": {}})
    assert made.status == 201, made.body
    template = made.body["id"]
    pools: dict[str, str] = {}
    for pool in ("a", "b"):
        body = {"clusterId": cluster, "hostnamePrefix": f"links-{pool}-", "worker": True,
                "nodeTemplateName": template, "quantity": 0}  # fmt: skip
        created = await admin.api.post("/v3/nodepools", body)
        assert created.status == 201, created.body
        pools[pool] = created.body["id"]
    nodes = {
        await node(kube, cluster, "links-a-1", pools["a"], template): pools["a"],
        await node(kube, cluster, "links-b-1", pools["b"], template): pools["b"],
        # A node no pool made (a custom node, or one the mirror found).
        await node(kube, cluster, "links-joined", "", template): "",
    }
    # Another cluster's node: a cluster's `nodes` link must leave it out.
    spec = {"displayName": "other", "driver": "imported"}
    await kube.create(kinds.Cluster(metadata=ObjectMeta(name=other), spec=spec))
    await node(kube, other, "links-elsewhere", "", template)

    projects = []
    for _ in range(2):
        made = await admin.api.post("/v3/projects", {"name": "links", "clusterId": "local"})
        assert made.status == 201, made.body
        projects.append(made.body["id"])
    namespaces = [f"links-{secrets.token_hex(3)}" for _ in projects]
    for project, namespace in zip(projects, namespaces, strict=True):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(
            name=namespace, annotations={names.ANNOTATION_PROJECT: project},
        )))  # fmt: skip
        # What kube-controller-manager would make; pods are admitted against it.
        core.create_namespaced_service_account(
            namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
        )
    workload = {"name": "links", "namespaceId": namespaces[0],
                "containers": [{"name": "app", "image": "registry.example/app:1.0"}]}  # fmt: skip
    made = await admin.api.post(f"/v3/projects/{projects[0]}/workloads", workload)
    assert made.status == 201, made.body
    credential = {"name": "links", "s3credentialConfig": {"accessKey": "AKIA1", "secretKey": "s"}}
    made = await admin.api.post("/v3/cloudcredentials", credential)
    assert made.status == 201, made.body
    # A /v1 view of its own, so that the /v1 links are walked too.
    view = {"metadata": {"name": f"links-{secrets.token_hex(3)}", "namespace": "links"},
            "spec": {"kubernetesVersion": catalog.UPSTREAM_VERSION}}  # fmt: skip
    made = await admin.api.post("/v1/provisioning.svc.io.clusters", view)
    assert made.status == 201, made.body

    async def seen() -> bool:
        listed = await admin.api.get(f"/v3/clusters/{cluster}/nodes")
        return listed.status == 200 and set(nodes) <= {n["id"] for n in listed.body["data"]}

    await eventually("the app to see the nodes", seen)
    return World(cluster, pools, nodes, projects[0])


def local(url: str) -> str:
    assert url.startswith(EXTERNAL_URL), url
    return url.removeprefix(EXTERNAL_URL)


@dataclass(frozen=True)
class Link:
    owner_type: str
    owner_id: str
    name: str
    url: str
    owner_cluster: str = ""  # the cluster the owner is in, when it says


def links_of(resource: dict[str, Any]) -> list[Link]:
    owner_type, owner_id = str(resource.get("type", "")), str(resource.get("id", ""))
    cluster = resource.get("clusterId")
    return [Link(owner_type, owner_id, name, url, cluster if isinstance(cluster, str) else "")
            for name, url in (resource.get("links") or {}).items()]  # fmt: skip


def items(answer: Response) -> list[dict[str, Any]]:
    body = answer.body
    return list(body["data"]) if isinstance(body, dict) and body.get("type") == "collection" else []


async def walk(api: Api, starts: list[str]) -> tuple[list[Link], dict[str, Response]]:
    """Every link reachable from `starts`, and the answer of each URL followed."""
    answers: dict[str, Response] = {}
    found: list[Link] = []
    todo = [Link("", "", "start", EXTERNAL_URL + start) for start in starts]
    while todo:
        link = todo.pop()
        found.append(link)
        if link.url in answers:
            continue
        assert len(answers) < MAX_URLS, "the walk does not end"
        answer = answers[link.url] = await api.get(local(link.url))
        if answer.status != 200 or not isinstance(answer.body, dict):
            continue
        if answer.body.get("type") == "apiRoot":
            todo += [Link("apiRoot", "", n, url) for n, url in answer.body["links"].items()]
        for resource in [answer.body, *items(answer)]:
            todo += links_of(resource)
    return [link for link in found if link.name != "start"], answers


async def test_every_link_of_every_resource_resolves_and_holds_only_what_it_names(
    admin: Person, world: World
) -> None:
    found, answers = await walk(admin.api, ["/v3", "/v1/provisioning.svc.io.clusters"])
    followed = {(link.owner_type, link.name) for link in found}
    # The walk reached the links this module's world has.
    for expected in (
        ("cluster", "nodes"),
        ("cluster", "projects"),
        ("nodePool", "nodes"),
        ("project", "namespaces"),
        ("project", "workloads"),
        ("workload", "project"),
        ("cloudCredential", "nodeTemplates"),
        ("provisioning.svc.io.cluster", "cluster"),
        ("node", "cluster"),
    ):
        assert expected in followed, expected
    states = {c["id"]: c["state"] for c in (await admin.api.get("/v3/clusters")).body["data"]}
    for link in found:
        answer = answers[link.url]
        if answer.status == 503 and states.get(link.owner_cluster) != "active":
            # Into a cluster corral has no way into (yet): the honest answer.
            assert answer.body["code"] == "ClusterUnavailable", (link, answer.body)
            assert world.project.split(":")[0] != link.owner_cluster, link
            continue
        assert answer.status == 200, (link, answer.body)
        if not items(answer) and not (
            isinstance(answer.body, dict) and answer.body.get("type") == "collection"
        ):
            continue
        query = urlsplit(link.url).query
        filters = answer.body.get("filters") or {}
        for key, value in parse_qsl(query):
            if key in PAGING:
                continue
            assert key in filters, f"{link}: {key} is no filter of the collection"
            for item in items(answer):
                assert str(item.get(key)) == value, (link, item["id"], item.get(key))
        # A collection under a resource holds only items of that resource.
        parent_field = f"{link.owner_type}Id"
        for item in items(answer):
            if parent_field in item and item["type"] != link.owner_type:
                assert item[parent_field] == link.owner_id, (link, item["id"])


async def test_every_create_type_is_where_its_collection_is(admin: Person, world: World) -> None:
    """`createTypes` says where to POST a new one: a collection of that type, never an address
    that is none (a workload's is under its project, a namespace's under its cluster)."""
    _, answers = await walk(admin.api, ["/v3"])
    offered = {
        (url, resource_type, target)
        for url, answer in answers.items()
        if isinstance(answer.body, dict) and answer.body.get("type") == "collection"
        for resource_type, target in (answer.body.get("createTypes") or {}).items()
    }
    assert {t for _, t, _ in offered} >= {"workload", "namespace", "project"}, offered
    for url, resource_type, target in offered:
        listed = await admin.api.get(local(target))
        # 405: a collection one may only POST to (`/v3/nodes`, custom nodes).
        assert listed.status in (200, 405), (url, target, listed.body)
        if listed.status == 200:
            assert listed.body["resourceType"] == resource_type, (url, target)
        else:
            assert "POST" in listed.headers["Allow"], (url, target)


async def test_a_pools_nodes_link_lists_its_nodes_and_no_others(
    admin: Person, world: World
) -> None:
    for pool_id in world.pools.values():
        pool = await admin.api.get(f"/v3/nodepools/{pool_id}")
        listed = await admin.api.get(local(pool.body["links"]["nodes"]))
        assert listed.status == 200, listed.body
        mine = {node for node, pool in world.nodes.items() if pool == pool_id}
        assert {n["id"] for n in listed.body["data"]} == mine
        assert {n["nodePoolId"] for n in listed.body["data"]} == {pool_id}
    cluster = await admin.api.get(f"/v3/clusters/{world.cluster}")
    everything = await admin.api.get(local(cluster.body["links"]["nodes"]))
    assert {n["id"] for n in everything.body["data"]} >= set(world.nodes)
    assert {n["clusterId"] for n in everything.body["data"]} == {world.cluster}
