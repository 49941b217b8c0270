"""The handlers every family shares: list, get, create, update and delete, from its `Family`.

The only aiohttp in a family's life: each handler turns the request into an `Ask`, calls the
family, and answers with its rendering (201 for a creation, 204 for a removal).
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from corral.apiserver.deps import caller, deps
from corral.apiserver.http.body import read_json
from corral.apiserver.http.encoding import encoded_response, json_response
from corral.apiserver.resources.family import Ask, Family
from corral.core import errors

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def ask(request: web.Request) -> Ask:
    held = deps(request)
    writing = request.method not in ("GET", "HEAD")
    now = datetime.datetime.now(datetime.UTC)
    return Ask(
        held, caller(request), held.external_url, request.match_info, request.query, now, writing
    )


async def found(family: Family[Any], request: web.Request) -> tuple[Ask, Any]:
    """The request's Ask and the resource its path names; 404 for one the caller may not see."""
    asked = ask(request)
    return asked, await family.found(asked, request.match_info["id"])


def routes(
    *families: Family[Any], collection_actions: Mapping[str, Handler] | None = None
) -> web.RouteTableDef:
    """The routes of the methods each family's schema declares, in one table. A POST on the
    first family's collection with `?action=` goes to its handler of that collection action
    (422 for another name), as it shares the create's route."""
    table = web.RouteTableDef()
    for i, family in enumerate(families):
        _add(table, family, collection_actions if i == 0 else None)
    return table


def _add(
    table: web.RouteTableDef,
    family: Family[Any],
    collection_actions: Mapping[str, Handler] | None,
) -> None:
    collection, item = family.collection_route, family.collection_route + "/{id}"
    schema = family.schema

    if "GET" in schema.collection_methods:

        @table.get(collection)
        async def list_all(request: web.Request) -> web.Response:
            return json_response(await family.page(ask(request), request.path))

    if "GET" in schema.resource_methods:

        @table.get(item)
        async def get_one(request: web.Request) -> web.Response:
            asked, obj = await found(family, request)
            if family.include is None:
                return encoded_response(family.encoded(asked, obj))
            return json_response(family.render(asked, obj) | await family.include(asked, obj))

    if family.create is not None:
        create = family.create

        @table.post(collection)
        async def create_one(request: web.Request) -> web.StreamResponse:
            name = request.query.get("action")
            if collection_actions is not None and name is not None:
                if name not in collection_actions:
                    raise errors.Invalid(f"Invalid action: {name}", code="InvalidAction")
                return await collection_actions[name](request)
            asked = ask(request)
            if family.before_create is not None:
                family.before_create(asked)
            body = await read_json(request, family.body_limit)
            obj = await create(asked, family.given(body, creating=True))
            return json_response(family.render(asked, obj), status=201)

    if family.update is not None:
        update = family.update

        @table.put(item)
        async def update_one(request: web.Request) -> web.Response:
            asked, obj = await found(family, request)
            if family.before_update is not None:
                family.before_update(asked, obj)
            body = await read_json(request, family.update_limit or family.body_limit)
            changed = await update(asked, obj, family.given(body, creating=False))
            return json_response(family.render(asked, changed))

    if family.delete is not None:
        delete = family.delete

        @table.delete(item)
        async def delete_one(request: web.Request) -> web.Response:
            asked, obj = await found(family, request)
            if family.before_delete is not None:
                family.before_delete(asked, obj)
            await delete(asked, obj)
            return web.Response(status=204)
