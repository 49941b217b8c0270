"""No write answers 2xx while ignoring a field it was given (docs/api.md, "Request bodies").

Every family `/v3/schemas` describes as writable (POST on its collection, PUT on a resource),
every action with or without an input, and the `/v1` view are sent one field they do not
have: each answers 422 `InvalidBodyContent` naming it, and nothing is made or changed. The
families are discovered from the schemas, so a new writable family is walked as soon as it is
served; one the estate below has no resource of fails the walk until it has one. A body that
is not a JSON object is 400, and the sign-in's missing fields are spec 7's `InvalidFormat`.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.core.api import ids
from corral.core.kube import kinds
from corral.core.provisioning import catalog

from .client import Api, error
from .clusters import provisioned
from .conftest import EXTERNAL_URL, Person

UNKNOWN = "notAFieldOfAnything"
V1 = "/v1/provisioning.svc.io.clusters"
LOGIN = "/v3-public/localProviders/local?action=login"


def path(url: str) -> str:
    """A link as the test client requests it: without the external URL."""
    assert url.startswith(EXTERNAL_URL), url
    return url.removeprefix(EXTERNAL_URL)


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


async def made(api: Api, url: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = await api.post(url, body)
    assert answer.status == 201, (url, answer.body)
    return dict(answer.body)


@pytest.fixture(scope="module")
async def estate(
    admin: Person, kube: AsyncClient, core: k8s.CoreV1Api, cluster: str
) -> AsyncIterator[dict[str, dict[str, Any]]]:
    """One resource of each kind a family is nested under or the walk updates, made as a
    client makes them (nodes and pods as the operator and the cluster would), by schema id.
    The families the bootstrap already fills (users, settings, drivers, clusters, sign-in
    providers) need nothing here."""
    api = admin.api
    project = await made(api, "/v3/projects", {"name": "bodies", "clusterId": "local"})
    namespace = await made(
        api, "/v3/clusters/local/namespaces", {"name": unique("bodies"), "projectId": project["id"]}
    )
    # No controllers run: the ServiceAccount admission wants the one they would make.
    core.create_namespaced_service_account(
        namespace["id"], k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    project_url = f"/v3/projects/{project['id']}"
    workload = await made(
        api,
        f"{project_url}/workloads",
        {"name": "web", "namespaceId": namespace["id"],
         "containers": [{"name": "web", "image": "nginx"}]},
    )  # fmt: skip
    # Project secrets are kept in the management cluster for a cluster corral reaches, not
    # for `local` itself: they are walked in a project of the imported cluster.
    elsewhere = await made(api, "/v3/projects", {"name": "bodies", "clusterId": cluster})
    elsewhere_url = f"/v3/projects/{elsewhere['id']}"
    await made(api, f"{elsewhere_url}/secrets", {"name": "s", "stringData": {"k": "v"}})
    await made(
        api,
        f"{project_url}/namespacedSecrets",
        {"name": "ns", "namespaceId": namespace["id"], "stringData": {"k": "v"}},
    )
    core.create_namespaced_pod(
        namespace["id"],
        k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(name="lone"),
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox")]),
        ),
    )
    await made(api, "/v3/cloudcredentials", {"kwokcredentialConfig": {}})
    template = await made(api, "/v3/nodetemplates", {"name": "bodies", "kwokConfig": {}})
    view = await made(
        api,
        V1,
        {"metadata": {"name": unique("bodies"), "namespace": "fleet-default"},
         "spec": {"kubernetesVersion": catalog.UPSTREAM_VERSION,
                  "rkeConfig": {"machinePools": [{
                      "name": "pool", "quantity": 0, "workerRole": True,
                      "machineConfigRef": {"kind": "NodeTemplate", "name": template["id"]}}]}}},
    )  # fmt: skip
    # A Node as the operator writes one for a machine of the cluster.
    node_name = ids.generate("m")
    await kube.create(
        kinds.Node(
            metadata=ObjectMeta(name=node_name, namespace=cluster),
            spec={"requestedHostname": "bodies-1"},
        )
    )
    # Registration tokens are made for provisioned clusters only.
    await made(api, "/v3/clusterregistrationtokens", {"clusterId": await provisioned(kube)})
    yield {
        "v1": view,
        # Taken over the first of their listing, which holds the projects of the other modules
        # on this worker too, in an order not fixed: one in the imported cluster with a quota
        # is checked there on a PUT, and this tier never reaches that cluster (503).
        "own": {"project": project_url},
        # Where each family nested under another has the resources made above.
        "nested": {
            "namespace": "/v3/clusters/local/namespaces",
            "node": f"/v3/clusters/{cluster}/nodes",
            "workload": f"{project_url}/workloads",
            "pod": f"{project_url}/pods",
            "secret": f"{elsewhere_url}/secrets",
            "namespacedSecret": f"{project_url}/namespacedSecrets",
            "event": f"{project_url}/events",
            "replicaSet": f"{project_url}/workloads/{workload['id']}/revisions",
        },
    }
    for made_project in (project, elsewhere):
        await api.delete(f"/v3/projects/{made_project['id']}")


async def schemas(api: Api) -> list[dict[str, Any]]:
    listed = await api.get("/v3/schemas")
    assert listed.status == 200, listed.body
    return list(listed.body["data"])


def writable(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        doc for doc in docs if "POST" in doc["collectionMethods"] or "PUT" in doc["resourceMethods"]
    ]


def collection(doc: dict[str, Any], estate: dict[str, Any]) -> str:
    """Where the schema's resources are: its top-level collection, or the one under a
    resource of its parent that the estate made."""
    if "collection" in doc["links"]:
        return path(doc["links"]["collection"])
    nested = estate["nested"]
    assert doc["id"] in nested, f"no {doc['parent']} to walk the {doc['id']}s of: add one"
    return str(nested[doc["id"]])


async def listing(api: Api, url: str) -> list[dict[str, Any]]:
    listed = await api.get(url)
    assert listed.status == 200, (url, listed.body)
    return list(listed.body["data"])


async def test_the_walk_covers_families_nested_and_not(admin: Person) -> None:
    """The discovery itself: what it finds includes the families of every kind of route, so
    an empty or partial `/v3/schemas` cannot make the walks below pass on nothing."""
    found = {doc["id"] for doc in writable(await schemas(admin.api))}
    assert {"user", "token", "cluster", "project", "workload", "namespace", "node",
            "nodePool", "authConfig", "setting"} <= found  # fmt: skip


async def test_every_create_refuses_an_unknown_field_and_makes_nothing(
    admin: Person, estate: dict[str, Any]
) -> None:
    for doc in writable(await schemas(admin.api)):
        if "POST" not in doc["collectionMethods"]:
            continue
        url = collection(doc, estate)
        before = await listing(admin.api, url)
        answer = await admin.api.post(url, {UNKNOWN: 1})
        assert answer.status == 422, (doc["id"], answer.status, answer.body)
        error(answer, 422, "InvalidBodyContent", UNKNOWN)
        assert await listing(admin.api, url) == before, doc["id"]


async def updatable(api: Api, doc: dict[str, Any], estate: dict[str, Any]) -> dict[str, Any]:
    if (own := estate["own"].get(doc["id"])) is not None:
        return dict((await api.get(own)).body)
    url = collection(doc, estate)
    for resource in await listing(api, url):
        # One another test is removing refuses changes for that reason.
        if "update" in resource["links"] and resource.get("state") != "removing":
            return resource
    raise AssertionError(f"no {doc['id']} to update at {url}: add one to the estate")


async def test_every_update_refuses_an_unknown_field_and_changes_nothing(
    admin: Person, estate: dict[str, Any]
) -> None:
    for doc in writable(await schemas(admin.api)):
        if "PUT" not in doc["resourceMethods"]:
            continue
        resource = await updatable(admin.api, doc, estate)
        url = path(resource["links"]["update"])
        before = await admin.api.get(url)
        for body in ({UNKNOWN: 1}, {**before.body, UNKNOWN: 1}):
            answer = await admin.api.put(url, body)
            assert answer.status == 422, (doc["id"], answer.status, answer.body)
            error(answer, 422, "InvalidBodyContent", UNKNOWN)
        assert (await admin.api.get(url)).body == before.body, doc["id"]


async def test_what_a_get_shows_can_be_put_back(admin: Person, estate: dict[str, Any]) -> None:
    """The other half of the rule: the read-only fields a client read (`id`, `state`,
    `links`, status) are known, and a PUT of the resource as read is taken."""
    for doc in writable(await schemas(admin.api)):
        if "PUT" not in doc["resourceMethods"]:
            continue
        resource = await updatable(admin.api, doc, estate)
        url = path(resource["links"]["update"])
        shown = (await admin.api.get(url)).body
        answer = await admin.api.put(url, shown)
        assert answer.status == 200, (doc["id"], answer.body)


async def test_every_action_refuses_an_unknown_field_and_does_nothing(
    admin: Person, estate: dict[str, Any]
) -> None:
    docs = await schemas(admin.api)
    for doc in docs:
        for name in doc.get("collectionActions", {}):
            url = collection(doc, estate)
            before = await listing(admin.api, url)
            answer = await admin.api.post(f"{url}?action={name}", {UNKNOWN: 1})
            error(answer, 422, "InvalidBodyContent", UNKNOWN)
            assert await listing(admin.api, url) == before, (doc["id"], name)
        if not doc.get("resourceActions"):
            continue
        resources = await listing(admin.api, collection(doc, estate))
        for name in doc["resourceActions"]:
            assert resources, f"no {doc['id']} to act on: add one to the estate"
            # The body is checked before whether the action applies: one the resource does
            # not offer now is refused for the field all the same.
            offering = [r for r in resources if name in r["actions"]] or resources
            url = path(offering[0]["links"]["self"]) + f"?action={name}"
            before = (await admin.api.get(url.split("?")[0])).body
            answer = await admin.api.post(url, {UNKNOWN: 1})
            assert answer.status == 422, (doc["id"], name, answer.status, answer.body)
            error(answer, 422, "InvalidBodyContent", UNKNOWN)
            assert (await admin.api.get(url.split("?")[0])).body == before, (doc["id"], name)


async def test_the_v1_view_refuses_unknown_fields_at_every_level(
    admin: Person, estate: dict[str, Any]
) -> None:
    view = estate["v1"]
    url = f"{V1}/{view['id']}"
    before = (await admin.api.get(url)).body
    for where, body in (
        (UNKNOWN, {**before, UNKNOWN: 1}),
        (f"metadata.{UNKNOWN}", {**before, "metadata": {**before["metadata"], UNKNOWN: 1}}),
        (f"spec.{UNKNOWN}", {**before, "spec": {**before["spec"], UNKNOWN: 1}}),
    ):
        error(await admin.api.put(url, body), 422, "InvalidBodyContent", where)
    relabelled = {**before, "metadata": {**before["metadata"], "labels": {"team": "a"}}}
    error(await admin.api.put(url, relabelled), 422, "InvalidAction", "metadata.labels")
    assert (await admin.api.get(url)).body == before
    error(await admin.api.post(V1, {UNKNOWN: 1}), 422, "InvalidBodyContent", UNKNOWN)
    assert (await admin.api.put(url, before)).status == 200


@pytest.mark.parametrize(
    "raw", [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"[" * 100 + b"]" * 100]
)
async def test_a_body_that_is_not_a_json_object_is_400(admin: Person, raw: bytes) -> None:
    for url in (
        "/v3/tokens",
        "/v3/projects",
        V1,
        LOGIN,
        "/v3/clusters/local?action=generateKubeconfig",
    ):
        async with admin.api.client.post(
            url, data=raw, headers={"Authorization": f"Bearer {admin.api.token}",
                                    "Content-Type": "application/json"},
        ) as answer:  # fmt: skip
            body = await answer.json()
        assert (answer.status, body["status"], body["code"]) == (400, 400, "InvalidBodyContent")


async def test_a_login_missing_a_field_is_400_invalid_format_naming_it(
    anonymous: Api, admin_password: str
) -> None:
    for body, field in (
        ({"password": admin_password}, "username"),
        ({"username": "admin"}, "password"),
        ({"username": "", "password": admin_password}, "username"),
    ):
        error(await anonymous.post(LOGIN, body), 400, "InvalidFormat", field)
    error(await anonymous.post(LOGIN, {"username": 7, "password": "x"}), 422, "InvalidFormat",
          "username")  # fmt: skip
    unknown = {"username": "admin", "password": admin_password, UNKNOWN: 1}
    error(await anonymous.post(LOGIN, unknown), 422, "InvalidBodyContent", UNKNOWN)
    # What Rancher's clients send is taken; a ttl is ignored, as documented.
    taken = {"username": "admin", "password": admin_password, "ttl": 60000,
             "description": "bodies", "responseType": "json"}  # fmt: skip
    assert (await anonymous.post(LOGIN, taken)).status == 201


async def test_unknown_keys_of_nested_objects_are_refused_naming_their_path(
    admin: Person, cluster: str
) -> None:
    """Nested objects the services read key by key: each unknown key is named with dots, and
    nothing is written."""
    project = await made(admin.api, "/v3/projects", {"name": "nested", "clusterId": cluster})
    url = f"/v3/projects/{project['id']}"
    before = (await admin.api.get(url)).body
    for part in ("resourceQuota", "namespaceDefaultResourceQuota"):
        quota = {"limit": {"limitsCpu": "1"}, "usedLimit": {}}
        error(await admin.api.put(url, {part: quota}), 422, "InvalidBodyContent",
              f"{part}.usedLimit")  # fmt: skip
    assert (await admin.api.get(url)).body == before
    local = (await admin.api.get("/v3/clusters/local")).body
    for body, field in (
        ({"localClusterAuthEndpoint": {"enabled": False, "port": 1}},
         "localClusterAuthEndpoint.port"),
        ({"defaultProjectNamespaceResourceQuota": {"limit": {}, "hard": {}}},
         "defaultProjectNamespaceResourceQuota.hard"),
    ):  # fmt: skip
        error(await admin.api.put("/v3/clusters/local", body), 422, "InvalidBodyContent", field)
    assert (await admin.api.get("/v3/clusters/local")).body == local
    imported = {"name": "nested", "importedConfig": {"kubeConfig": "", "context": "x"}}
    before_clusters = await listing(admin.api, "/v3/clusters")
    error(await admin.api.post("/v3/clusters", imported), 422, "InvalidBodyContent",
          "importedConfig.context")  # fmt: skip
    assert await listing(admin.api, "/v3/clusters") == before_clusters
