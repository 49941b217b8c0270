"""`/v3/projects/{project_id}/namespacedSecrets`: Secrets in one namespace of a project, kept
in the downstream cluster itself (issue 12). The id is `<namespace>:<name>`.

Every Secret of a type a team writes in the project's namespaces is one, whoever made it
(kubectl too), except corral's copies of project secrets (`/secrets` shows those) and what the
cluster or Helm keep there for themselves (service account and bootstrap tokens, Helm
releases). Membership comes from the API server's watch of the cluster's namespaces; the
Secrets themselves are read from the cluster on each request, one listing per namespace of
the project (a few at a time), so no API server holds a cluster's secrets in memory.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Secret

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, base_url, caller, deps
from corral.apiserver.http.body import read_json, text
from corral.apiserver.http.schemas import Schema
from corral.apiserver.services import secrets as shared
from corral.apiserver.services.visibility import visible_project
from corral.apiserver.state.downstream import downstream_namespaces
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import secrets

SCHEMA = Schema(
    id="namespacedSecret",
    plural="namespacedSecrets",
    fields=shared.schema_fields(namespaced=True),
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    parent="project",
)
SECRETS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:namespacedSecrets)}"
# Listings in flight at once to one cluster for one request.
LIST_CONCURRENCY = 8

routes = web.RouteTableDef()


def _id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def _collection_url(request: web.Request, pid: str) -> str:
    return f"{base_url(request)}/v3/projects/{pid}/namespacedSecrets"


def _render(request: web.Request, pid: str, obj: Obj) -> dict[str, Any]:
    meta = obj["metadata"]
    body = shared.fields(obj, pid, _id(obj), meta["name"], meta["namespace"])
    return shared.render(base_url(request), SCHEMA, body, _collection_url(request, pid))


async def _members(request: web.Request, project: Obj) -> set[str]:
    """The project's namespaces that are not being deleted."""
    cluster, pid = project["metadata"]["namespace"], _pid(project)
    cache = await downstream_namespaces(request.app[DEPS].connections, cluster)
    return {
        n["metadata"]["name"]
        for n in cache.by_index("project", pid)
        if not n["metadata"].get("deletionTimestamp")
    }


def _pid(project: Obj) -> str:
    return f"{project['metadata']['namespace']}:{project['metadata']['name']}"


async def _reader(request: web.Request, project: Obj) -> AsyncClient:
    """corral's own client: read-only members see a secret's keys, which their `view` role
    downstream does not, and never its data, which corral leaves out."""
    return await request.app[DEPS].connections.client(project["metadata"]["namespace"])


async def _writer(request: web.Request, project: Obj) -> AsyncClient:
    """A client that acts as the caller: their write is judged by the cluster as theirs."""
    cluster = project["metadata"]["namespace"]
    return await request.app[DEPS].connections.client_as(cluster, principal(request).downstream())


async def _find(request: web.Request, project: Obj) -> Obj:
    secret_id, pid = request.match_info["id"], _pid(project)
    wanted = ScopedId.parse_or_none(secret_id)
    missing = errors.not_found(f"secret {secret_id} not found in project {pid}")
    if wanted is None or wanted.namespace not in await _members(request, project):
        raise missing
    client = await _reader(request, project)
    try:
        obj = as_dict(await client.get(Secret, wanted.name, namespace=wanted.namespace))
    except KubeApiError as exc:
        if exc.status.code == 404:
            raise missing from None
        raise
    if not secrets.is_namespaced_secret(obj):
        raise missing
    return obj


@routes.get(SECRETS)
async def list_secrets(request: web.Request) -> web.Response:
    project = visible_project(deps(request), caller(request), request.match_info["project"])
    pid = _pid(project)
    members = await _members(request, project)
    if wanted := request.query.get("namespaceId"):
        members &= {wanted}
    client = await _reader(request, project)
    limit = asyncio.Semaphore(LIST_CONCURRENCY)

    async def listed(namespace: str) -> list[Obj]:
        async with limit:
            return [as_dict(o) async for o in client.list(Secret, namespace=namespace)]

    found = await asyncio.gather(*map(listed, sorted(members)))
    objs = [obj for objs in found for obj in objs if secrets.is_namespaced_secret(obj)]
    body = shared.collection(
        request, SCHEMA, pid, objs, _id,
        lambda o: shared.fields(o, pid, _id(o), o["metadata"]["name"], o["metadata"]["namespace"]),
        lambda o: _render(request, pid, o), _collection_url(request, pid),
    )  # fmt: skip
    return web.json_response(body)


@routes.get(SECRETS + "/{id}")
async def get_secret(request: web.Request) -> web.Response:
    project = visible_project(deps(request), caller(request), request.match_info["project"])
    obj = await _find(request, project)
    return web.json_response(_render(request, _pid(project), obj))


@routes.post(SECRETS)
async def create_secret(request: web.Request) -> web.Response:
    project = shared.writable_project(request, request.match_info["project"])
    pid = _pid(project)
    body = await read_json(request)
    shared.check_type(body, SCHEMA)
    namespace = text(body, "namespaceId", max_length=63, required=True)
    name, spec = shared.created_spec(body)
    if namespace not in await _members(request, project):
        raise errors.invalid(
            "namespaceId", f"namespace {namespace} is not in project {pid}", "InvalidReference"
        )
    manifest = secrets.secret_body(name, namespace, spec, {}, shared.creator_annotation(request))
    client = await _writer(request, project)
    taken = f"a secret {name} already exists in {namespace}"
    created = await shared.create(client, manifest, taken)
    return web.json_response(_render(request, pid, created), status=201)


@routes.put(SECRETS + "/{id}")
async def update_secret(request: web.Request) -> web.Response:
    """Replaces what the body gives, keeps the rest; written on condition that the Secret is
    still the version read (409 `Conflict` otherwise, and nothing changes)."""
    project = shared.writable_project(request, request.match_info["project"])
    current = await _find(request, project)
    body = await read_json(request)
    shared.check_type(body, SCHEMA)
    meta = current["metadata"]
    spec = shared.updated_spec(body, current, meta["name"], meta["namespace"])
    client = await _writer(request, project)
    replaced = await client.replace(shared.as_secret(shared.replacement(current, spec)))
    return web.json_response(_render(request, _pid(project), as_dict(replaced)))


@routes.delete(SECRETS + "/{id}")
async def delete_secret(request: web.Request) -> web.Response:
    project = shared.writable_project(request, request.match_info["project"])
    obj = await _find(request, project)
    meta = obj["metadata"]
    client = await _writer(request, project)
    await delete_if_present(client, Secret, meta["name"], meta["namespace"])
    return web.Response(status=204)
