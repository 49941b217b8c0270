"""`/v1/provisioning.svc.io.clusters` (spec 4.4, provisioning.md 4.6): provisioned clusters
and their machine pools in Steve's shape, a second view of what `/v3/clusters` and
`/v3/nodepools` show (`services.provisioning`), written through the same path
(`services.clusters`). The type matches singular or plural, in any case."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.deps import caller, deps
from corral.apiserver.http import steve
from corral.apiserver.http.body import read_json
from corral.apiserver.http.encoding import json_response
from corral.apiserver.services import clusters, provisioning
from corral.core import errors
from corral.core.kube.informer import Obj
from corral.core.provisioning import v1

TYPE = "/v1/{type}"
ITEM = TYPE + "/{namespace}/{name}"
routes = web.RouteTableDef()


def checked_type(request: web.Request) -> None:
    """Other `/v1` types are not served: 404, as for a path that names nothing."""
    if not v1.is_type(request.match_info["type"]):
        raise errors.not_found(f"no type {request.match_info['type']} under /v1")


def render(request: web.Request, cluster: Obj) -> dict[str, Any]:
    held = deps(request)
    return steve.resource(
        held.external_url, v1.SCHEMA_ID, v1.PLURAL, provisioning.view(held, cluster),
        writable=provisioning.writable(caller(request), cluster),
        links={"cluster": f"{held.external_url}/v3/clusters/{cluster['metadata']['name']}"},
    )  # fmt: skip


@routes.get(TYPE)
@routes.get(TYPE + "/{namespace}")
async def listing(request: web.Request) -> web.Response:
    checked_type(request)
    held, who = deps(request), caller(request)
    shown = provisioning.listed(held, who, request.match_info.get("namespace"))
    body = steve.collection(
        held.external_url, request.path, v1.SCHEMA_ID, v1.PLURAL,
        [(steve.namespaced_id(*v1.name_of(c)), c) for c in shown],
        lambda c: render(request, c), request.query,
        provisioning.revision(held, shown), can_create=who.is_admin,
    )  # fmt: skip
    return json_response(body)


def found(request: web.Request) -> Obj:
    checked_type(request)
    match = request.match_info
    return provisioning.found(deps(request), caller(request), match["namespace"], match["name"])


@routes.get(ITEM)
async def get_cluster(request: web.Request) -> web.Response:
    return json_response(render(request, found(request)))


@routes.post(TYPE)
@routes.post(TYPE + "/{namespace}")
async def create(request: web.Request) -> web.Response:
    checked_type(request)
    namespace = request.match_info.get("namespace")
    body = await read_json(request)
    created = await provisioning.create(deps(request), caller(request), namespace, body)
    return json_response(render(request, created), status=201)


@routes.put(ITEM)
async def update_cluster(request: web.Request) -> web.Response:
    cluster = found(request)
    body = await read_json(request)
    updated = await provisioning.update(deps(request), caller(request), cluster, body)
    return json_response(render(request, updated))


@routes.delete(ITEM)
async def delete_cluster(request: web.Request) -> web.Response:
    await clusters.delete(deps(request), caller(request), found(request))
    return web.Response(status=204)
