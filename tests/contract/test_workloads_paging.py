"""A project's workloads listed a page at a time: the pages, followed by their `next` links,
hold the items of the whole listing in its order, with a filter and a sort too, and a marker
starts a page at its item. The workloads are written straight into `local` (as kubectl would)
in three namespaces of one project, of three kinds, with names that repeat across
namespaces and kinds so that a sort by name has ties."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import quote

import pytest
from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.batch_v1 import CronJob

from .client import Api, eventually
from .conftest import EXTERNAL_URL, Person

POD = {"containers": [{"name": "web", "image": "example/web:1"}]}
COUNT = 30


def template(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}}, "spec": POD}


def objects(namespace: str) -> list[Any]:
    """Ten workloads of the namespace: deployments w0-w4, stateful sets w0-w2, cron jobs c0, c1."""
    meta = lambda name: {"name": name, "namespace": namespace}  # noqa: E731
    selector = lambda name: {"matchLabels": {"app": name}}  # noqa: E731
    made: list[Any] = [
        Deployment.from_dict({"metadata": meta(f"w{n}"), "spec": {
            "replicas": 0, "selector": selector(f"w{n}"), "template": template(f"w{n}")}})
        for n in range(5)
    ]  # fmt: skip
    made += [
        StatefulSet.from_dict({"metadata": meta(f"w{n}"), "spec": {
            "replicas": 0, "serviceName": f"w{n}", "selector": selector(f"s{n}"),
            "template": template(f"s{n}")}})
        for n in range(3)
    ]  # fmt: skip
    job = {"template": {"spec": {**POD, "restartPolicy": "Never"}}}
    made += [
        CronJob.from_dict({"metadata": meta(f"c{n}"), "spec": {
            "schedule": "0 0 1 1 *", "suspend": True, "jobTemplate": {"spec": job}}})
        for n in range(2)
    ]  # fmt: skip
    return made


@pytest.fixture(scope="module")
async def project(admin: Person, kube: AsyncClient) -> str:
    """The project's id, once its workloads are all listed."""
    api = admin.api
    made = await api.post("/v3/projects", {"name": "paging", "clusterId": "local"})
    assert made.status == 201, made.body
    pid = made.body["id"]
    for n in range(3):
        name = f"paging-{secrets.token_hex(3)}-{n}"
        space = await api.post("/v3/clusters/local/namespaces", {"name": name, "projectId": pid})
        assert space.status == 201, space.body
        for obj in objects(name):
            await kube.create(obj)

    async def listed() -> bool:
        answer = await api.get(f"/v3/projects/{pid}/workloads")
        return answer.status == 200 and answer.body["pagination"]["total"] == COUNT

    await eventually("every workload to be listed", listed)
    return str(pid)


async def pages(api: Api, first: str) -> tuple[list[str], list[int]]:
    """The ids of every page from `first` on, following `next`; and each page's total."""
    ids: list[str] = []
    totals: list[int] = []
    url: str | None = first
    while url is not None:
        answer = await api.get(url)
        assert answer.status == 200, answer.body
        ids += [item["id"] for item in answer.body["data"]]
        totals.append(answer.body["pagination"]["total"])
        following = answer.body["pagination"].get("next")
        url = following.removeprefix(EXTERNAL_URL) if following else None
        assert len(totals) <= COUNT + 1, "the next links go round"
    return ids, totals


QUERIES = [
    "",
    "order=desc",
    "sort=name",
    "sort=name&order=desc",
    "workloadType=statefulSet&sort=name",
    "namespaceId_ne=none&sort=namespaceId",
    "sort=state&name_in=w1&name_in=c0",
    "state_ne=paused&sort=name",
]


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("limit", [1, 7])
async def test_the_pages_hold_the_whole_listing_in_its_order(
    admin: Person, project: str, query: str, limit: int
) -> None:
    base = f"/v3/projects/{project}/workloads"
    whole = await admin.api.get(f"{base}?{query}")
    assert whole.status == 200, whole.body
    expected = [item["id"] for item in whole.body["data"]]
    assert expected and len(set(expected)) == len(expected)
    ids, totals = await pages(admin.api, f"{base}?{query}&limit={limit}")
    assert ids == expected
    assert set(totals) == {len(expected)}


async def test_a_sort_with_ties_keeps_them_in_id_order(admin: Person, project: str) -> None:
    listed = await admin.api.get(f"/v3/projects/{project}/workloads?sort=name")
    shown = [(item["name"], item["id"]) for item in listed.body["data"]]
    assert len(shown) == COUNT and shown == sorted(shown)
    assert len({name for name, _ in shown}) < COUNT  # there are ties
    reverse = await admin.api.get(f"/v3/projects/{project}/workloads?sort=name&order=desc")
    names = [item["name"] for item in reverse.body["data"]]
    assert names == sorted(names, reverse=True)


async def test_a_filter_on_what_an_id_gives_matches_what_the_items_show(
    admin: Person, project: str
) -> None:
    base = f"/v3/projects/{project}/workloads"
    everything = (await admin.api.get(base)).body["data"]
    space = everything[0]["namespaceId"]
    listed = await admin.api.get(f"{base}?namespaceId={space}&workloadType=deployment")
    assert [item["id"] for item in listed.body["data"]] == [
        item["id"]
        for item in everything
        if item["namespaceId"] == space and item["workloadType"] == "deployment"
    ]
    assert listed.body["pagination"]["total"] == 5
    assert {item["projectId"] for item in everything} == {project}
    none = await admin.api.get(f"{base}?projectId=c-other:p-other")
    assert none.body["data"] == [] and none.body["pagination"]["total"] == 0


async def test_a_marker_starts_the_page_at_its_item(admin: Person, project: str) -> None:
    base = f"/v3/projects/{project}/workloads"
    expected = [item["id"] for item in (await admin.api.get(base)).body["data"]]
    marker = expected[12]
    page = await admin.api.get(f"{base}?limit=5&marker={quote(marker)}")
    assert [item["id"] for item in page.body["data"]] == expected[12:17]
    pagination = page.body["pagination"]
    assert pagination["partial"] is True and pagination["total"] == COUNT
    assert pagination["next"] == f"{EXTERNAL_URL}{base}?limit=5&marker={quote(expected[17])}"
    previous = await admin.api.get(pagination["previous"].removeprefix(EXTERNAL_URL))
    assert [item["id"] for item in previous.body["data"]] == expected[7:12]
    last = await admin.api.get(pagination["last"].removeprefix(EXTERNAL_URL))
    assert [item["id"] for item in last.body["data"]] == expected[-5:]
    # A marker of no item (a workload deleted meanwhile) starts at the first page.
    gone = await admin.api.get(f"{base}?limit=5&marker=deployment:nowhere:w0")
    assert [item["id"] for item in gone.body["data"]] == expected[:5]


async def test_a_listed_workload_is_shown_as_it_is_now(
    admin: Person, project: str, kube: AsyncClient
) -> None:
    """A change to a workload keeps the listing's rows (no workload came or went) and still
    shows: the page is made of the objects as the caches hold them now."""
    base = f"/v3/projects/{project}/workloads"
    first = (await admin.api.get(f"{base}?workloadType=deployment&limit=1")).body["data"][0]
    assert first["scale"] == 0
    await kube.patch(Deployment, first["name"], {"spec": {"replicas": 0, "paused": True}},
                     namespace=first["namespaceId"])  # fmt: skip

    async def paused() -> bool:
        page = await admin.api.get(f"{base}?workloadType=deployment&limit=1")
        return bool(page.body["data"][0]["paused"])

    await eventually("the listing to show the deployment paused", paused)


async def test_a_filter_on_state_matches_what_the_items_show(admin: Person, project: str) -> None:
    base = f"/v3/projects/{project}/workloads"
    everything = (await admin.api.get(base)).body["data"]
    states = {item["state"] for item in everything}
    assert len(states) >= 2, states  # suspended cron jobs are paused, the rest are not
    for state in states:
        for query, keeps in ((f"state={state}", state.__eq__), (f"state_ne={state}", state.__ne__)):
            listed = await admin.api.get(f"{base}?{query}&limit=3")
            expected = [item["id"] for item in everything if keeps(item["state"])]
            assert [item["id"] for item in listed.body["data"]] == expected[:3], query
            assert listed.body["pagination"]["total"] == len(expected), query


async def test_a_filter_on_state_sees_a_workload_change_state(
    admin: Person, project: str, kube: AsyncClient
) -> None:
    """The listing's rows outlive a change to a workload; its state is read as it is now."""
    base = f"/v3/projects/{project}/workloads"
    running = (await admin.api.get(f"{base}?workloadType=deployment&state_ne=paused")).body
    chosen = running["data"][-1]
    await kube.patch(Deployment, chosen["name"], {"spec": {"paused": True}},
                     namespace=chosen["namespaceId"])  # fmt: skip

    async def listed_paused() -> bool:
        page = await admin.api.get(f"{base}?state=paused&workloadType=deployment")
        return chosen["id"] in [item["id"] for item in page.body["data"]]

    await eventually("the state filter to list the deployment paused", listed_paused)
    still = await admin.api.get(f"{base}?workloadType=deployment&state_ne=paused")
    assert chosen["id"] not in [item["id"] for item in still.body["data"]]


async def two_projects_and_workloads(
    api: Api, kube: AsyncClient, prefix: str
) -> tuple[str, str, str]:
    """Two projects of `local`, and a namespace of the first holding `objects`' workloads:
    the first project's id, the second's, the namespace."""
    home, other = [
        (await api.post("/v3/projects", {"name": f"{prefix}-{n}", "clusterId": "local"})).body["id"]
        for n in range(2)
    ]
    space = f"{prefix}-{secrets.token_hex(3)}"
    made = await api.post("/v3/clusters/local/namespaces", {"name": space, "projectId": home})
    assert made.status == 201, made.body
    for obj in objects(space):
        await kube.create(obj)
    return home, other, space


async def test_a_filtered_and_sorted_page_follows_workloads_and_namespaces(
    admin: Person, kube: AsyncClient
) -> None:
    """A page filtered by namespace and sorted by name reads views the listing's rows keep:
    a workload created, changed or deleted, and a namespace moved to another project, show in
    the next page of each project as in a fresh listing."""
    api = admin.api
    home, other, space = await two_projects_and_workloads(api, kube, "views")
    query = f"namespaceId={space}&sort=name&order=desc&limit=4"

    async def names(project: str) -> list[str]:
        page = await api.get(f"/v3/projects/{project}/workloads?{query}")
        assert page.status == 200, page.body
        return [item["name"] for item in page.body["data"]]

    async def shows(project: str, expected: list[str]) -> bool:
        return await names(project) == expected

    await eventually("the namespace's workloads", lambda: shows(home, ["w4", "w3", "w2", "w2"]))
    extra = objects(space)[0]
    extra.metadata.name = "w9"
    extra.spec.selector.matchLabels = extra.spec.template.metadata.labels = {"app": "w9"}
    await kube.create(extra)
    await eventually("a created workload", lambda: shows(home, ["w9", "w4", "w3", "w2"]))
    await kube.patch(Deployment, "w9", {"spec": {"paused": True}}, namespace=space)

    async def paused_first() -> bool:
        page = await api.get(f"/v3/projects/{home}/workloads?{query}")
        return bool(page.body["data"][0]["paused"])

    await eventually("a changed workload as it is now", paused_first)
    await kube.delete(Deployment, "w9", namespace=space)
    await eventually("a deleted workload gone", lambda: shows(home, ["w4", "w3", "w2", "w2"]))
    assert await names(other) == []
    moved = await api.put(f"/v3/clusters/local/namespaces/{space}", {"projectId": other})
    assert moved.status == 200, moved.body
    await eventually("the moved namespace's workloads in the other project",
                     lambda: shows(other, ["w4", "w3", "w2", "w2"]))  # fmt: skip
    await eventually("and no longer in its first", lambda: shows(home, []))


async def test_a_page_filtered_by_state_follows_workloads_and_namespaces(
    admin: Person, kube: AsyncClient
) -> None:
    """A filter on state reads rows that know each workload's state, made again when a
    workload of the project comes, changes or goes: the next page follows each, and a
    namespace moved to another project takes its workloads' states with it."""
    api = admin.api
    home, other, space = await two_projects_and_workloads(api, kube, "states")

    async def paused(project: str) -> list[str]:
        page = await api.get(f"/v3/projects/{project}/workloads?state=paused&sort=name")
        assert page.status == 200, page.body
        assert all(item["state"] == "paused" for item in page.body["data"])
        return [item["name"] for item in page.body["data"]]

    async def shows(project: str, expected: list[str]) -> bool:
        return await paused(project) == expected

    # The suspended cron jobs are paused; nothing runs the others' controllers here.
    await eventually("the paused cron jobs", lambda: shows(home, ["c0", "c1"]))
    extra = objects(space)[0]
    extra.metadata.name = "w9"
    extra.spec.paused = True
    extra.spec.selector.matchLabels = extra.spec.template.metadata.labels = {"app": "w9"}
    await kube.create(extra)
    await eventually("a workload created paused", lambda: shows(home, ["c0", "c1", "w9"]))
    await kube.patch(Deployment, "w0", {"spec": {"paused": True}}, namespace=space)
    await eventually("a workload paused", lambda: shows(home, ["c0", "c1", "w0", "w9"]))
    await kube.patch(Deployment, "w9", {"spec": {"paused": False}}, namespace=space)
    await eventually("a workload resumed", lambda: shows(home, ["c0", "c1", "w0"]))
    not_paused = await api.get(f"/v3/projects/{home}/workloads?state_ne=paused&sort=state")
    listed = [item["id"] for item in not_paused.body["data"]]
    assert f"deployment:{space}:w9" in listed and f"deployment:{space}:w0" not in listed
    await kube.delete(Deployment, "w0", namespace=space)
    await eventually("a paused workload deleted", lambda: shows(home, ["c0", "c1"]))
    moved = await api.put(f"/v3/clusters/local/namespaces/{space}", {"projectId": other})
    assert moved.status == 200, moved.body
    await eventually("the moved namespace's paused workloads in the other project",
                     lambda: shows(other, ["c0", "c1"]))  # fmt: skip
    await eventually("and no longer in its first", lambda: shows(home, []))
