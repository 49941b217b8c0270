"""`/v3/settings`: every user may read them; only admins change them."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authn import principal
from corral.apiserver.auth.authz import require_admin
from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import read_json, text
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.core import errors, settings
from corral.core.kube import kinds
from corral.core.kube.client import as_dict

SCHEMA = Schema(
    id="setting",
    plural="settings",
    fields={
        "name": readonly("string"),
        "value": Field(
            "string",
            update=True,
            required=True,
            description="Required; the empty string restores the default",
        ),
        "default": readonly("string"),
        "customized": readonly("boolean", "True when value overrides the default"),
        "description": readonly("string"),
    },
    resource_methods=("GET", "PUT"),
    collection_methods=("GET",),
)

routes = web.RouteTableDef()


def fields(request: web.Request, name: str) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    stored = request.app[DEPS].stores.settings.get(name) or {}
    definition = settings.CATALOG.get(name)
    default = stored.get("default") or (definition.default if definition else "")
    value = stored.get("value", "")
    return {"id": name, "name": name, "value": value or default, "default": default,
            "customized": bool(value) and value != default,
            "description": definition.description if definition else ""}  # fmt: skip


def render(request: web.Request, name: str) -> dict[str, Any]:
    return envelope.resource(base_url(request), SCHEMA, fields(request, name))


def names(request: web.Request) -> list[str]:
    stored = {o["metadata"]["name"] for o in request.app[DEPS].stores.settings.all()}
    return sorted(stored | set(settings.CATALOG))


@routes.get(v3("settings"))
async def list_settings(request: web.Request) -> web.Response:
    body = envelope.collection(base_url(request), SCHEMA, names(request), lambda n: n,
                               lambda n: fields(request, n), lambda n: render(request, n),
                               request.query, request.path, can_create=False)  # fmt: skip
    return web.json_response(body)


@routes.get(v3("settings", "/{id}"))
async def get_setting(request: web.Request) -> web.Response:
    name = request.match_info["id"]
    if name not in names(request):
        raise errors.not_found(f"setting {name} not found")
    return web.json_response(render(request, name))


@routes.put(v3("settings", "/{id}"))
async def update_setting(request: web.Request) -> web.Response:
    name = request.match_info["id"]
    if name not in names(request):
        raise errors.not_found(f"setting {name} not found")
    require_admin(principal(request), "change settings")
    body = SCHEMA.writable(await read_json(request), creating=False)
    # A body without `value` is a mistake, not a reset: resetting is explicit, `"value": ""`.
    if body.get("value") is None:
        raise errors.missing("value")
    value = text(body, "value", max_length=settings.MAX_VALUE)
    if name in settings.CATALOG and value:
        settings.check(name, value)
    definition = settings.CATALOG.get(name)
    obj = kinds.Setting(metadata=ObjectMeta(name=name), value=value,
                            default=definition.default if definition else "")  # fmt: skip
    applied = await request.app[DEPS].kube.apply(obj, force=True)
    request.app[DEPS].stores.settings.put(as_dict(applied))
    return web.json_response(render(request, name))
