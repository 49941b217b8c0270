"""`/v1/provisioning.svc.io.clusters` (spec 4.4, provisioning.md 4.6): provisioned clusters
and their machine pools in Steve's shape, a second view of what `/v3/clusters` and
`/v3/nodepools` show (`services.provisioning`). The type matches singular or plural, in any
case."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import base_url
from corral.apiserver.http import steve
from corral.apiserver.http.body import read_json
from corral.apiserver.services import provisioning
from corral.core import errors
from corral.core.kube.informer import Obj
from corral.core.provisioning import v1

TYPE = "/v1/{type}"
routes = web.RouteTableDef()


def checked_type(request: web.Request) -> None:
    """Other `/v1` types are not served: 404, as for a path that names nothing."""
    if not v1.is_type(request.match_info["type"]):
        raise errors.not_found(f"no type {request.match_info['type']} under /v1")


def render(request: web.Request, cluster: Obj) -> dict[str, Any]:
    base = base_url(request)
    return steve.resource(
        base, v1.SCHEMA_ID, v1.PLURAL, provisioning.view(request, cluster),
        writable=provisioning.writable(request, cluster),
        links={"cluster": f"{base}/v3/clusters/{cluster['metadata']['name']}"},
    )  # fmt: skip


async def listing(request: web.Request, namespace: str | None) -> web.Response:
    checked_type(request)
    shown = provisioning.listed(request, namespace)
    body = steve.collection(
        base_url(request), request.path, v1.SCHEMA_ID, v1.PLURAL,
        [(steve.namespaced_id(*v1.name_of(c)), c) for c in shown],
        lambda c: render(request, c), request.query,
        provisioning.revision(request, shown), can_create=principal(request).is_admin,
    )  # fmt: skip
    return web.json_response(body)


@routes.get(TYPE)
async def list_all(request: web.Request) -> web.Response:
    return await listing(request, None)


@routes.get(TYPE + "/{namespace}")
async def list_namespace(request: web.Request) -> web.Response:
    return await listing(request, request.match_info["namespace"])


def found(request: web.Request) -> Obj:
    checked_type(request)
    return provisioning.found(request, request.match_info["namespace"], request.match_info["name"])


@routes.get(TYPE + "/{namespace}/{name}")
async def get_cluster(request: web.Request) -> web.Response:
    return web.json_response(render(request, found(request)))


async def create(request: web.Request, namespace: str | None) -> web.Response:
    checked_type(request)
    created = await provisioning.create(request, namespace, await read_json(request))
    return web.json_response(render(request, created), status=201)


@routes.post(TYPE)
async def create_any(request: web.Request) -> web.Response:
    return await create(request, None)


@routes.post(TYPE + "/{namespace}")
async def create_in(request: web.Request) -> web.Response:
    return await create(request, request.match_info["namespace"])


@routes.put(TYPE + "/{namespace}/{name}")
async def update_cluster(request: web.Request) -> web.Response:
    cluster = found(request)
    updated = await provisioning.update(request, cluster, await read_json(request))
    return web.json_response(render(request, updated))


@routes.delete(TYPE + "/{namespace}/{name}")
async def delete_cluster(request: web.Request) -> web.Response:
    cluster = found(request)
    await provisioning.delete(request, cluster)
    return web.Response(status=204)
