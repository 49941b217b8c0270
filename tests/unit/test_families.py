"""The generic handlers serve what a family declares: collection actions beside the create,
the family's own 404 message, the body as sent or filtered by the schema, a PUT's own body
limit, and links and actions only where the write's own check lets the caller through."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authn import PRINCIPAL, Principal
from corral.apiserver.http.errors import answer as answer_failure
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.core import errors
from corral.core.auth.tokens import TokenRecord
from tests.unit.held import holding

BASE = "https://corral.example.com"
SCHEMA = Schema(
    id="thing",
    plural="things",
    fields={"color": Field("string", create=True, update=True)},
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
)

TOKEN = TokenRecord.from_object({
    "metadata": {"name": "token-1", "creationTimestamp": "2026-11-22T10:00:00Z"},
    "spec": {"userId": "u-1"},
})  # fmt: skip


class Memo:
    """Access as the middleware would find it: this test's caller reaches nothing."""

    def get(self, user_id: str, is_admin: bool, stores: object) -> Access:
        return Access(user_id, is_admin, {}, {})


def family(**overrides: Any) -> tuple[Family[dict[str, Any]], dict[str, dict[str, Any]]]:
    """A family over a dict; what create and update were given is kept under `given`."""
    things: dict[str, dict[str, Any]] = {"t-1": {"id": "t-1", "color": "red"}}

    async def create(ask: Ask, body: dict[str, Any]) -> dict[str, Any]:
        things["t-2"] = {"id": "t-2", "color": body.get("color", ""), "given": body}
        return things["t-2"]

    async def update(ask: Ask, obj: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        obj.update(given=body)
        return obj

    declared: dict[str, Any] = {
        "schema": SCHEMA,
        "listed": lambda ask: things.values(),
        "find": lambda ask, thing_id: things.get(thing_id),
        "fields": lambda ask, obj: {"id": obj["id"], "color": obj["color"]},
        "ident": lambda obj: obj["id"],
        "create": create,
        "update": update,
    }
    return Family[dict[str, Any]](**(declared | overrides)), things


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    clients: list[TestClient[web.Request, web.Application]] = []

    async def start(routes: web.RouteTableDef) -> TestClient[web.Request, web.Application]:
        @web.middleware
        async def as_user(request: web.Request, handler: handlers.Handler) -> web.StreamResponse:
            request[PRINCIPAL] = Principal("u-1", TOKEN, False, False)
            try:
                return await handler(request)
            except Exception as failure:  # noqa: BLE001 - as the API's middleware answers
                return answer_failure(request, failure)

        app = holding(web.Application(middlewares=[as_user]),
                      external_url=BASE, access=Memo())  # fmt: skip
        app.add_routes(routes)
        client = TestClient(TestServer(app))
        await client.start_server()
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


async def test_a_collection_action_is_served_beside_the_create_and_another_is_refused(
    serve: Any,
) -> None:
    async def wave(request: web.Request) -> web.Response:
        return web.json_response({"waved": True})

    declared, things = family()
    client = await serve(handlers.routes(declared, collection_actions={"wave": wave}))
    assert await (await client.post("/v3/things?action=wave")).json() == {"waved": True}
    refused = await client.post("/v3/things?action=jump", json={})
    assert refused.status == 422
    assert (await refused.json())["code"] == "InvalidAction"
    assert (await client.post("/v3/things", json={"color": "blue"})).status == 201
    assert things["t-2"]["color"] == "blue"


async def test_without_collection_actions_an_action_query_does_not_stop_a_create(
    serve: Any,
) -> None:
    declared, _ = family()
    client = await serve(handlers.routes(declared))
    assert (await client.post("/v3/things?action=wave", json={})).status == 201


async def test_a_family_may_answer_404_without_echoing_the_id(serve: Any) -> None:
    plain, _ = family()
    fixed, _ = family(missing="thing not found")
    assert (await (await (await serve(handlers.routes(plain))).get("/v3/things/t-9")).json())[
        "message"
    ] == "thing t-9 not found"
    answer = await (await serve(handlers.routes(fixed))).get("/v3/things/t-9")
    assert (answer.status, (await answer.json())["message"]) == (404, "thing not found")


async def test_the_schema_filters_the_body_unless_the_family_takes_it_raw(serve: Any) -> None:
    # What a client sends back of what it read (`id`, `links`) is known, and not writable.
    body = {"color": "blue", "id": "t-9", "links": {}, "blueConfig": {"size": 1}}
    filtered, things = family(named_fields=lambda key: key.endswith("Config"))
    await (await serve(handlers.routes(filtered))).post("/v3/things", json=body)
    assert things["t-2"]["given"] == {"color": "blue"}
    raw, raw_things = family(body_as_sent=True, named_fields=lambda key: key == "blueConfig")
    client = await serve(handlers.routes(raw))
    await client.post("/v3/things", json=body)
    assert raw_things["t-2"]["given"] == body
    await client.put("/v3/things/t-1", json=body)
    assert raw_things["t-1"]["given"] == body


@pytest.mark.parametrize("body_as_sent", [False, True])
async def test_a_field_the_family_does_not_know_is_refused_naming_it(
    serve: Any, body_as_sent: bool
) -> None:
    declared, things = family(body_as_sent=body_as_sent)
    client = await serve(handlers.routes(declared))
    for answer in (
        await client.post("/v3/things", json={"color": "blue", "colour": "blue"}),
        await client.put("/v3/things/t-1", json={"color": "blue", "colour": "blue"}),
    ):
        assert answer.status == 422
        refused = await answer.json()
        assert (refused["code"], refused["fieldName"]) == ("InvalidBodyContent", "colour")
    assert things == {"t-1": {"id": "t-1", "color": "red"}}


async def test_a_put_has_its_own_body_limit_when_the_family_gives_one(serve: Any) -> None:
    declared, _ = family(body_limit=64, update_limit=4096)
    client = await serve(handlers.routes(declared))
    padded = {"color": "x" * 200}
    assert (await client.post("/v3/things", json=padded)).status == 413
    assert (await client.put("/v3/things/t-1", json=padded)).status == 200


def refuse_t1(ask: Ask, obj: dict[str, Any], *action: str) -> None:
    if obj["id"] == "t-1":
        raise errors.forbidden("t-1 is not yours")


async def test_links_and_actions_are_those_the_writes_checks_let_through(serve: Any) -> None:
    """The same check refuses the write and leaves out its link: t-1 offers nothing, t-2
    offers everything its schema has."""
    schema = Schema(id="thing", plural="things", fields=SCHEMA.fields,
                    resource_methods=("GET", "PUT", "DELETE"), collection_methods=("GET", "POST"),
                    resource_actions={"polish": {}})  # fmt: skip

    async def delete(ask: Ask, obj: dict[str, Any]) -> None:
        things.pop(obj["id"])

    declared, things = family(schema=schema, actions=lambda ask, obj: ["polish"],
                              before_update=refuse_t1, before_delete=refuse_t1,
                              before_action=refuse_t1, delete=delete)  # fmt: skip
    client = await serve(handlers.routes(declared))
    await client.post("/v3/things", json={"color": "blue"})
    shown = {item["id"]: item for item in (await (await client.get("/v3/things")).json())["data"]}
    assert set(shown["t-1"]["links"]) == {"self"} and shown["t-1"]["actions"] == {}
    assert set(shown["t-2"]["links"]) == {"self", "update", "remove"}
    assert set(shown["t-2"]["actions"]) == {"polish"}
    # The checks that hid the links still refuse the writes.
    assert (await client.put("/v3/things/t-1", json={"color": "green"})).status == 403
    assert (await client.delete("/v3/things/t-1")).status == 403
    assert things["t-1"]["color"] == "red"
    assert (await client.delete("/v3/things/t-2")).status == 204


async def test_create_types_follow_the_creates_check(serve: Any) -> None:
    def refused(ask: Ask) -> None:
        raise errors.forbidden("no")

    for check, offered in ((None, True), (refused, False)):
        declared, _ = family(before_create=check)
        listed = await (await (await serve(handlers.routes(declared))).get("/v3/things")).json()
        assert bool(listed["createTypes"]) is offered
