"""`/v3/schemas`: every type's fields, methods and actions, for schema-driven clients."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.deps import base_url, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.schemas import Field, Schema
from corral.core import errors

SCHEMA = Schema(
    id="schema",
    plural="schemas",
    fields={"pluralName": Field("string"), "resourceFields": Field("map[json]")},
)

routes = web.RouteTableDef()


def fields(schema: Schema) -> dict[str, Any]:
    """What a schema's document shows under the names collections filter by, but `id`."""
    return {"pluralName": schema.plural}


@routes.get("/v3/schemas")
async def list_schemas(request: web.Request) -> web.Response:
    base = base_url(request)
    body = envelope.collection(
        base,
        SCHEMA,
        deps(request).schemas.all(),
        lambda schema: schema.id,
        fields,
        lambda schema: schema.document(base),
        request.query,
        request.path,
        can_create=False,
    )
    return json_response(body)


@routes.get("/v3/schemas/{id}")
async def get_schema(request: web.Request) -> web.Response:
    schema = deps(request).schemas.get(request.match_info["id"])
    if schema is None:
        raise errors.not_found("no such schema")
    return json_response(schema.document(base_url(request)))
