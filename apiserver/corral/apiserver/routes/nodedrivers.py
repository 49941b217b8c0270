"""`/v3/nodedrivers` (spec 2.7, 4.4): every authenticated user may read the drivers (node
templates name them); only administrators create, change, (de)activate and delete them.

How a driver is named and what non-administrators see of it: `services.nodedrivers`. What a
driver is doing (downloaded, checked, asked for its schema) is the operator's: its conditions
and `state`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.http.body import read_input
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.objects import name_of, object_fields, object_stamp
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import nodedrivers
from corral.core import errors
from corral.core.drivers import status as driver_status
from corral.core.kube.informer import Obj

ACTIONS = ("activate", "deactivate")

SCHEMA = Schema(
    id="nodeDriver",
    plural="nodeDrivers",
    fields={
        "name": Field("string", create=True,
                      description="The driver's name (templates carry <name>Config): "
                                  "a lowercase letter then letters or digits, at most 57"),
        "displayName": Field("string", create=True, update=True,
                             description="At most 57 characters"),
        "description": Field("string", create=True, update=True),
        "url": Field("string", create=True, update=True, required=True,
                     description="https://, http:// or file:/// location of the executable"),
        "checksum": Field("string", create=True, update=True,
                          description="Hex md5, sha1, sha256 or sha512 (by length); empty: "
                                      "no check"),
        "active": Field("boolean", create=True, update=True, required=True),
        "builtin": readonly("boolean"),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={name: {} for name in ACTIONS},
)  # fmt: skip


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    """The resource's fields short of metadata, spec and status: small, so collections
    filter and sort by them."""
    spec = obj.get("spec") or {}
    return {
        "id": name_of(obj),
        "name": name_of(obj),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "url": spec.get("url", ""),
        "checksum": spec.get("checksum", ""),
        "active": spec.get("active") is True,
        "builtin": spec.get("builtin") is True,
        **object_stamp(obj),
    }


def offered(ask: Ask, obj: Obj) -> list[str]:
    return ["deactivate" if (obj.get("spec") or {}).get("active") is True else "activate"]


async def create(ask: Ask, body: dict[str, Any]) -> Obj:
    nodedrivers.check_kind(body)
    return await nodedrivers.create(ask.deps, ask.who, SCHEMA.writable(body, creating=True))


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: nodedrivers.listed(ask.deps, ask.who),
    find=lambda ask, name: nodedrivers.find(ask.deps, ask.who, name),
    fields=fields,
    state=driver_status.state,
    detail=lambda ask, obj: object_fields(obj, ("name", "creationTimestamp", "uid", "generation")),
    actions=offered,
    before_create=lambda ask: nodedrivers.check_create(
        ask.who, ask.writing and "action" in ask.query
    ),
    before_update=lambda ask, obj: nodedrivers.may_change(ask.who),
    before_delete=lambda ask, obj: nodedrivers.may_delete(ask.who, obj),
    before_action=lambda ask, obj, name: nodedrivers.may_activate(ask.who, name),
    create=create,
    update=lambda ask, obj, body: nodedrivers.update(
        ask.deps, ask.who, obj, SCHEMA.writable(body, creating=False)
    ),
    delete=lambda ask, obj: nodedrivers.delete(ask.deps, ask.who, obj),
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)


@routes.post(v3("nodedrivers", "/{id}"))
async def driver_action(request: web.Request) -> web.Response:
    asked, obj = await handlers.found(FAMILY, request)
    name = action(request, set(ACTIONS))
    if name is None:
        raise errors.Unsupported("POST on a node driver needs ?action=<name>")
    nodedrivers.may_activate(asked.who, name)
    await read_input(request, name)
    return json_response(
        FAMILY.render(asked, await nodedrivers.activate(asked.deps, asked.who, obj, name))
    )
