from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import MultiDict

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authn import Principal
from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import DEPS
from corral.apiserver.http import envelope
from corral.apiserver.http.objects import name_of, shown_status
from corral.apiserver.http.renderings import Renderings
from corral.apiserver.http.rows import Rows
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.resources.family import Ask
from corral.apiserver.resources.scoped import scoped_id
from corral.apiserver.routes import (
    cloudcredentials,
    clusterroletemplatebindings,
    clusters,
    globalrolebindings,
    nodedrivers,
    nodepools,
    nodes,
    nodetemplates,
    projectroletemplatebindings,
    projects,
    tokens,
    users,
)
from corral.core.auth.tokens import TokenRecord
from corral.core.kube.informer import Obj
from tests.unit.held import holding

SCHEMA = Schema(
    id="thing",
    plural="things",
    fields={
        "color": Field("string", create=True),
        "size": Field("int", update=True),
        "shiny": Field("boolean"),
        "secret": Field("string", create=True, write_only=True),
        "detail": Field("json"),
    },
    resource_methods=("GET", "PUT"),
    collection_methods=("GET", "POST"),
)
BASE = "https://h"
Thing = dict[str, Any]


def items() -> list[Thing]:
    return [{"id": f"t{i}", "color": c, "size": i}
            for i, c in enumerate(["red", "blue", "red", "green", "red"])]  # fmt: skip


def ident(thing: Thing) -> str:
    return str(thing["id"])


def fields(thing: Thing) -> dict[str, Any]:
    return {k: v for k, v in thing.items() if k != "detail"}


def render(thing: Thing) -> dict[str, Any]:
    return envelope.resource(BASE, SCHEMA, {**fields(thing), "detail": {"of": thing["id"]}})


def collect(query: str) -> dict[str, Any]:
    pairs = [tuple(p.split("=", 1)) for p in query.split("&") if p]
    return envelope.collection(
        BASE, SCHEMA, items(), ident, fields, render, MultiDict(pairs), "/v3/things", True
    )


def test_resource_links_follow_the_methods() -> None:
    rendered = envelope.resource(BASE, SCHEMA, {"id": "t1"}, actions=["paint"])
    assert rendered["links"] == {
        "self": "https://h/v3/things/t1",
        "update": "https://h/v3/things/t1",
    }
    assert rendered["actions"] == {"paint": "https://h/v3/things/t1?action=paint"}
    assert (rendered["type"], rendered["baseType"]) == ("thing", "thing")


def test_collection_shape() -> None:
    body = collect("")
    assert body["type"] == "collection" and body["resourceType"] == "thing"
    assert body["createTypes"] == {"thing": "https://h/v3/things"}
    assert body["pagination"] == {"limit": 1000, "total": 5}
    assert body["links"] == {"self": "https://h/v3/things"}
    assert "secret" not in body["filters"]  # write-only fields are not filters
    assert body["filters"]["color"] is None


def test_filters_with_modifiers_and_unknown_keys_ignored() -> None:
    assert [i["id"] for i in collect("color=red")["data"]] == ["t0", "t2", "t4"]
    assert [i["id"] for i in collect("color_ne=red")["data"]] == ["t1", "t3"]
    assert [i["id"] for i in collect("color_in=blue&color_in=green")["data"]] == ["t1", "t3"]
    assert [i["id"] for i in collect("color_notin=red&size=3")["data"]] == ["t3"]
    assert len(collect("bogus=1")["data"]) == 5
    assert collect("color_in=blue&color_in=green")["filters"]["color"] == [
        {"modifier": "in", "value": ["blue", "green"]}
    ]


def test_sort_and_pages() -> None:
    assert [i["id"] for i in collect("sort=color")["data"]][:2] == ["t1", "t3"]
    assert collect("sort=size&order=desc")["data"][0]["id"] == "t4"
    page = collect("limit=2")
    assert [i["id"] for i in page["data"]] == ["t0", "t1"]
    assert page["pagination"]["next"] == "https://h/v3/things?limit=2&marker=t2"
    second = collect("limit=2&marker=t2")
    assert [i["id"] for i in second["data"]] == ["t2", "t3"]
    assert second["pagination"]["previous"].endswith("marker=t0")
    assert collect("limit=-1")["pagination"]["limit"] == 10000
    assert collect("limit=abc")["pagination"]["limit"] == 1000


def test_only_the_page_is_rendered() -> None:
    rendered: list[str] = []

    def counting(thing: Thing) -> dict[str, Any]:
        rendered.append(thing["id"])
        return render(thing)

    query = MultiDict([("color_ne", "green"), ("limit", "2"), ("marker", "t2")])
    envelope.collection(BASE, SCHEMA, items(), ident, fields, counting, query, "/v3/things", True)
    assert rendered == ["t2", "t4"]


def listing_of(
    objects: list[Thing], made: list[str] | None = None, computed: list[str] | None = None
) -> envelope.Listing[Thing, Thing]:
    """The objects as a listing whose rows know their color, and whose fuller rows know their
    size too, made from the objects as they are when a query asks; `made` records what it
    makes, `computed` whose size it read."""

    def make(thing: Thing) -> Thing:
        if made is not None:
            made.append(thing["id"])
        return thing

    def size(thing: Thing) -> Any:
        if computed is not None:
            computed.append(thing["id"])
        return thing.get("size")

    rows = [(ident(o), {"color": o.get("color")}, o) for o in objects]

    def fuller() -> Rows[Thing]:
        return Rows((item_id, {**shown, "size": size(o)}, o) for item_id, shown, o in rows)

    return envelope.Listing(Rows(rows), frozenset({"color"}), make, fuller,
                            frozenset({"color", "size"}))  # fmt: skip


def test_a_listing_makes_only_the_page_when_the_query_reads_only_what_it_knows() -> None:
    made: list[str] = []
    query = MultiDict([("color_ne", "green"), ("sort", "size"), ("limit", "2"),
                       ("marker", "t2")])  # fmt: skip
    page = envelope.collection(BASE, SCHEMA, listing_of(items(), made), ident, fields, render,
                               query, "/v3/things", True)  # fmt: skip
    assert made == [item["id"] for item in page["data"]] and len(made) == 2
    made.clear()
    shiny = MultiDict([("shiny", "true"), ("limit", "1")])
    envelope.collection(BASE, SCHEMA, listing_of(items(), made), ident, fields, render, shiny,
                        "/v3/things", True)  # fmt: skip
    assert sorted(made) == sorted(ident(o) for o in items())  # each made once, for its fields


def test_a_listing_reads_its_fuller_rows_only_for_a_query_on_what_only_they_know() -> None:
    things, made, computed = items(), [], []
    listing = listing_of(things, made, computed)
    red = MultiDict([("color", "red"), ("limit", "1")])
    envelope.collection(BASE, SCHEMA, listing, ident, fields, render, red, "/v3/things", True)
    assert computed == [] and made == ["t0"]
    made.clear()
    things[4]["size"] = 0  # the object changed since its row was made
    page = envelope.collection(BASE, SCHEMA, listing, ident, fields, render,
                               MultiDict([("size", "0")]), "/v3/things", True)  # fmt: skip
    assert [item["id"] for item in page["data"]] == ["t0", "t4"]
    assert sorted(computed) == sorted(ident(o) for o in things) and made == ["t0", "t4"]


def test_writable_drops_fields_the_operation_may_not_set() -> None:
    body = {"color": "red", "size": 3, "id": "x", "status": {}}
    assert SCHEMA.writable(body, creating=True) == {"color": "red"}
    assert SCHEMA.writable(body, creating=False) == {"size": 3}


# -- paging before rendering gives what rendering everything gave ------------------------------

WORDS = ("red", "blue", "", "true", "false", "thing", "0", "1", "t1", "t3")
things = st.lists(
    st.fixed_dictionaries(
        {
            "color": st.sampled_from(("red", "blue", None)),
            "size": st.integers(0, 3),
            "shiny": st.booleans(),
            "detail": st.sampled_from(("a", "b")),
        },
        optional={"secret": st.sampled_from(("red", "x"))},
    ),
    max_size=12,
).map(lambda found: [{"id": f"t{i}", **thing} for i, thing in enumerate(found)])
FILTER_KEYS = [
    f"{name}{suffix}"
    for name in ("color", "size", "shiny", "type", "id", "secret", "bogus")
    for suffix in ("", "_ne", "_in", "_notin", "_like")
]
queries = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(FILTER_KEYS), st.sampled_from(WORDS)),
        st.tuples(st.just("sort"), st.sampled_from(("id", "color", "size", "shiny", "type", "x"))),
        st.tuples(st.just("order"), st.sampled_from(("asc", "desc", "up"))),
        st.tuples(st.just("limit"), st.sampled_from(("-1", "0", "1", "2", "3", "abc", "10001"))),
        st.tuples(st.just("marker"), st.sampled_from(("t0", "t2", "t5", "nope"))),
    ),
    max_size=6,
)


def identity(item: dict[str, Any]) -> dict[str, Any]:
    return item


@settings(max_examples=400, deadline=None)
@given(things, queries, st.sampled_from(("id", "size")), st.booleans())
def test_paging_before_rendering_gives_the_body_of_rendering_everything(
    objects: list[Thing], pairs: list[tuple[str, str]], default_sort: str, newest_first: bool
) -> None:
    query = MultiDict(pairs)
    lazy = envelope.collection(
        BASE, SCHEMA, objects, ident, fields, render, query, "/v3/things", True, default_sort,
        newest_first,
    )  # fmt: skip
    eager = envelope.collection(
        BASE, SCHEMA, [render(o) for o in objects], ident, identity, identity, query,
        "/v3/things", True, default_sort, newest_first,
    )  # fmt: skip
    assert json.dumps(lazy) == json.dumps(eager)
    # The same objects as a listing that knows one field and computes another without making
    # an object: a query on the others makes every object, and either way the body is the
    # same.
    listed = envelope.collection(
        BASE, SCHEMA, listing_of(objects), ident, fields, render, query, "/v3/things", True,
        default_sort, newest_first,
    )  # fmt: skip
    assert json.dumps(listed) == json.dumps(lazy)

    page, total, limit = reference([render(o) for o in objects], query, default_sort, newest_first)
    assert [item["id"] for item in lazy["data"]] == [item["id"] for item in page]
    assert lazy["data"] == page
    assert (lazy["pagination"]["total"], lazy["pagination"]["limit"]) == (total, limit)
    if "next" in lazy["pagination"]:
        assert marker_of(lazy["pagination"]["next"]) not in [item["id"] for item in page]


@settings(max_examples=200, deadline=None)
@given(things, st.lists(queries, min_size=2, max_size=8))
def test_a_listing_kept_across_queries_answers_each_as_a_fresh_one(
    objects: list[Thing], asked: list[list[tuple[str, str]]]
) -> None:
    """The views its rows keep (a filter on one color, a sort by color) are made by one
    query and read by the next: each answer is the one of a listing made for it alone."""
    kept = listing_of(objects)
    for pairs in asked:
        query = MultiDict(pairs)
        answer = envelope.collection(BASE, SCHEMA, kept, ident, fields, render, query,
                                     "/v3/things", True)  # fmt: skip
        fresh = envelope.collection(BASE, SCHEMA, listing_of(objects), ident, fields, render,
                                    query, "/v3/things", True)  # fmt: skip
        assert answer == fresh


def test_a_filter_and_a_sort_on_a_known_field_read_the_rows_views_made_once() -> None:
    """`color=red&sort=color` groups the rows by color once and sorts the red ones once: a
    second page reads both as kept, in the order a sort of every row gives."""
    things = [{"id": f"t{i}", "color": c, "size": i}
              for i, c in enumerate(["red", "blue", "red", "green", "red", "blue"])]  # fmt: skip
    listing = listing_of(things)
    rows = listing.rows
    assert [row[0] for row in rows.where("color", "red")] == ["t0", "t2", "t4"]
    assert rows.where("color", "red") is rows.where("color", "red")
    assert rows.where("color", "purple") == ()
    by_color = rows.view(None, "color", descending=True)
    assert [row[0] for row in by_color] == ["t0", "t2", "t4", "t3", "t1", "t5"]
    assert rows.view(None, "color", descending=True) is by_color
    assert [row[0] for row in rows.view(("color", "blue"), "id", descending=True)] == ["t5", "t1"]
    asked: list[tuple[Any, ...]] = []
    kept_view = rows.view

    def view(where: tuple[str, str] | None, sort: str, descending: bool) -> Any:
        asked.append((where, sort, descending))
        return kept_view(where, sort, descending)

    rows.view = view  # type: ignore[method-assign]
    query = MultiDict([("color", "red"), ("sort", "color"), ("limit", "2"), ("marker", "t2")])
    page = envelope.collection(BASE, SCHEMA, listing, ident, fields, render, query,
                               "/v3/things", True)  # fmt: skip
    assert asked == [(("color", "red"), "color", False)]
    assert [item["id"] for item in page["data"]] == ["t2", "t4"]
    assert page["pagination"]["total"] == 3
    assert page["filters"]["color"] == [{"modifier": "eq", "value": "red"}]


def reference(
    rendered: list[dict[str, Any]], query: MultiDict[str], default_sort: str, newest_first: bool
) -> tuple[list[dict[str, Any]], int, int]:
    """Render everything, then filter, sort and page as norman does: the page, the number
    of matching items and the page size."""
    names = SCHEMA.filters()

    def text(value: Any) -> str:
        return json.dumps(value) if isinstance(value, bool) else "" if value is None else str(value)

    def keeps(item: dict[str, Any]) -> bool:
        for key in set(query.keys()):
            name, _, modifier = key.rpartition("_")
            if not name or modifier not in ("ne", "in", "notin"):
                name, modifier = key, "eq"
            if name not in names:
                continue
            value, wanted = text(item.get(name)), query.getall(key)
            if (
                (modifier == "eq" and value != wanted[0])
                or (modifier == "ne" and value == wanted[0])
                or (modifier == "in" and value not in wanted)
                or (modifier == "notin" and value in wanted)
            ):
                return False
        return True

    matching = [item for item in rendered if keeps(item)]
    sort = query.get("sort", default_sort)
    sort = sort if sort in names else default_sort
    descending = query.get("order", "desc" if newest_first else "asc") == "desc"
    # Items of equal sort fields in id order, page after page.
    matching.sort(key=lambda item: str(item["id"]))
    matching.sort(key=lambda item: text(item.get(sort)), reverse=descending)
    try:
        limit = int(query.get("limit", "1000"))
    except ValueError:
        limit = 1000
    limit = 10000 if limit == -1 or limit > 10000 else limit if limit > 0 else 1000
    ids = [item["id"] for item in matching]
    start = ids.index(query["marker"]) if query.get("marker") in ids else 0
    return matching[start : start + limit], len(matching), limit


def marker_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["marker"][0]


# -- each kind's fields are what its rendered resource shows ------------------------------------

STAMP = {"creationTimestamp": "2026-11-22T10:00:00Z", "uid": "u-1", "generation": 2}
CONDITIONS = [{"type": "Ready", "status": "False", "message": "down"}]
BINDING = {
    "metadata": {"name": "b-1", "namespace": "c-1", **STAMP},
    "spec": {
        "userName": "u-1",
        "roleTemplateName": "cluster-owner",
        "clusterName": "c-1",
        "projectName": "c-1:p-1",
        "globalRoleName": "admin",
    },
}
SAMPLES = [
    (clusters, name_of, {
        "metadata": {"name": "c-1", "labels": {"a": "b"}, **STAMP},
        "spec": {"displayName": "one", "driver": "imported", "enableNetworkPolicy": True},
        "status": {"conditions": CONDITIONS},
    }),
    (nodes, scoped_id, {
        "metadata": {"name": "m-1", "namespace": "c-1", **STAMP},
        "spec": {"requestedHostname": "n1", "worker": True, "desiredNodeTaints": []},
        "status": {"nodeName": "n1", "internalNodeStatus": {"unschedulable": True}},
    }),
    (nodepools, scoped_id, {
        "metadata": {"name": "np-1", "namespace": "c-1", **STAMP},
        "spec": {"hostnamePrefix": "w-", "quantity": 2, "worker": True,
                 "nodeTemplateName": "nt-1"},
        "status": {"requested": 2, "ready": 1, "conditions": CONDITIONS},
    }),
    (projects, projects.project_id, {
        "metadata": {"name": "p-1", "namespace": "c-1", **STAMP},
        "spec": {"displayName": "one", "resourceQuota": {"limit": {"pods": "4"}}},
        "status": {"conditions": CONDITIONS},
    }),
    (clusterroletemplatebindings, clusterroletemplatebindings.FAMILY.ident, BINDING),
    (projectroletemplatebindings, projectroletemplatebindings.FAMILY.ident, BINDING),
    (globalrolebindings, name_of, BINDING),
    (users, name_of, {
        "metadata": {"name": "u-1", **STAMP},
        "spec": {"username": "one", "displayName": "One", "enabled": True},
    }),
    (tokens, lambda shown: shown.record.name, tokens.Shown(TokenRecord.from_object({
        "metadata": {"name": "token-1", **STAMP},
        "spec": {"userId": "u-1", "ttlMillis": 60000, "clusterName": "c-1"},
    }))),
    (nodedrivers, name_of, {
        "metadata": {"name": "kwok", **STAMP},
        "spec": {"url": "https://drivers/kwok", "active": True, "builtin": True},
        "status": {"conditions": CONDITIONS},
    }),
    (nodetemplates, name_of, {
        "metadata": {"name": "nt-1", "annotations": {"field.svc.io/creatorId": "u-1"}, **STAMP},
        "spec": {"driver": "kwok", "config": {"cpu": "2"}, "cloudCredentialName": "cc-1"},
    }),
    (cloudcredentials, name_of, {
        "metadata": {"name": "cc-1", "deletionTimestamp": "2026-11-22T11:00:00Z", **STAMP},
        "spec": {"driver": "kwok", "fields": ["token"], "displayName": "key"},
    }),
]  # fmt: skip


@pytest.mark.parametrize(
    ("route", "route_ident", "obj"), SAMPLES, ids=[route.SCHEMA.id for route, _, _ in SAMPLES]
)
def test_ids_and_fields_are_what_the_rendered_resource_shows(
    route: ModuleType, route_ident: Callable[[Obj], str], obj: Obj
) -> None:
    names = [name for name in route.SCHEMA.filters() if name not in ("id", "type")]
    if hasattr(route, "FAMILY"):
        asked = admin_ask()
        rendered = route.FAMILY.render(asked, obj)
        values = route.FAMILY.all_fields(asked, obj)
    else:
        app = holding(web.Application(), external_url=BASE)
        rendered = route.render(make_mocked_request("GET", "/", app=app), obj)
        values = route.fields(obj)
    assert route_ident(obj) == rendered["id"]
    assert {n: values.get(n) for n in names} == {n: rendered.get(n) for n in names}


def admin_ask() -> Ask:
    """An administrator's request, as the families' renderings see it."""
    token = TokenRecord.from_object({"metadata": {"name": "t", **STAMP}, "spec": {"userId": "u-1"}})
    who = Caller(Principal("u-1", token, False, True), Access("u-1", True, {}, {}))
    deps = holding(web.Application(), external_url=BASE)[DEPS]
    return Ask(deps, who, BASE, {}, MultiDict(), datetime.datetime.now(datetime.UTC))


def test_conditions_show_sorted_by_type_whatever_order_they_were_stored_in() -> None:
    status = {"conditions": [{"type": "Updated"}, {"type": "Drained"}, {"type": "Ready"}],
              "other": 1}  # fmt: skip
    assert [c["type"] for c in shown_status(status)["conditions"]] == [
        "Drained", "Ready", "Updated"
    ]  # fmt: skip
    assert shown_status(status)["other"] == 1
    assert shown_status({}) == {}


def test_the_local_cluster_shows_no_remove_link_and_another_does() -> None:
    asked = admin_ask()
    local, other = ({"metadata": {"name": name, **STAMP}, "spec": {"driver": driver}}
                    for name, driver in (("local", "local"), ("c-1", "imported")))  # fmt: skip
    assert "remove" not in clusters.FAMILY.render(asked, local)["links"]
    assert clusters.FAMILY.render(asked, other)["links"]["remove"] == f"{BASE}/v3/clusters/c-1"


def test_a_node_links_and_acts_under_its_cluster_by_its_name() -> None:
    node = {"metadata": {"name": "m-1", "namespace": "c-1", **STAMP}, "spec": {}, "status": {}}
    rendered = nodes.FAMILY.render(admin_ask(), node)
    url = f"{BASE}/v3/clusters/c-1/nodes/m-1"
    assert rendered["id"] == "c-1:m-1"
    assert rendered["links"] == {"self": url, "update": url, "remove": url,
                                 "cluster": f"{BASE}/v3/clusters/c-1"}  # fmt: skip
    assert rendered["actions"] == {a: f"{url}?action={a}" for a in ("cordon", "uncordon", "drain")}


def test_a_tokens_encoded_answer_is_its_rendering_whatever_was_encoded_before() -> None:
    """Kept encodings (`Family.encoded`) answer what rendering afresh would: after a new
    version of the token, for another token asking, and once it has expired."""
    deps = holding(web.Application(), external_url=BASE, renderings=Renderings())[DEPS]
    admin = Caller(Principal("u-1", admin_ask().who.principal.token, False, True),
                   Access("u-1", True, {}, {}))  # fmt: skip
    half_an_hour = datetime.datetime(2026, 11, 28, 10, 30, tzinfo=datetime.UTC)

    def shown(version: str, description: str) -> tokens.Shown:
        obj = {"metadata": {"name": "token-a", "resourceVersion": version,
                            "creationTimestamp": "2026-11-28T10:00:00Z"},
               "spec": {"userId": "u-1", "ttlMillis": 3_600_000,
                        "description": description}}  # fmt: skip
        return tokens.Shown(TokenRecord.from_object(obj))

    def answer(token: tokens.Shown, who: Caller, now: datetime.datetime) -> dict[str, Any]:
        asked = Ask(deps, who, BASE, {}, MultiDict(), now)
        encoded = json.loads(tokens.FAMILY.encoded(asked, token))
        assert encoded == tokens.FAMILY.render(asked, token)
        return encoded  # type: ignore[no-any-return]

    first = shown("1", "first")
    assert answer(first, admin, half_an_hour) | {"current": False, "expired": False} == answer(
        first, admin, half_an_hour
    )
    assert answer(shown("2", "second"), admin, half_an_hour)["description"] == "second"
    itself = Caller(Principal("u-1", first.record, False, True), admin.access)
    assert answer(first, itself, half_an_hour)["current"] is True
    assert answer(first, admin, half_an_hour)["current"] is False
    an_hour = datetime.datetime(2026, 11, 28, 11, 0, tzinfo=datetime.UTC)
    assert answer(first, admin, an_hour)["expired"] is True
