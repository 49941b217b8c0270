"""`/v3/projects/{project_id}/secrets`: a project's secrets, which every namespace of the
project gets a copy of (issue 12).

A project secret is a Secret in `svc-system` of the management cluster, under a name derived
from its cluster, project and name, labelled with its cluster and project, its name in an
annotation (`corral.core.projects.secrets`); its id is `<project>:<name>`
(`p-xxxxx:db-password`), as Rancher names secrets in a project's namespace. The operator
copies it into the project's namespaces (`operator.downstream.projects`), except in the cluster
`local`, whose namespaces are the management cluster's own: there corral holds no Secret rights
outside `svc-system`, so a project of `local` has none. Reads go to the management cluster's
API on each request: no API server keeps secret data in memory between requests. What a
response shows is in `services.secrets`: never the data.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube.resources.core_v1 import Secret

from corral.apiserver.deps import DEPS, base_url, caller, deps
from corral.apiserver.http.body import read_json
from corral.apiserver.http.schemas import Schema
from corral.apiserver.services import secrets as shared
from corral.apiserver.services.visibility import visible_project
from corral.core import errors
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import secrets

SCHEMA = Schema(
    id="secret",
    plural="secrets",
    fields=shared.schema_fields(namespaced=False),
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    parent="project",
)
SECRETS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:secrets)}"

routes = web.RouteTableDef()


def _where(project: Obj) -> tuple[str, str, str]:
    """(project id, cluster, project name)."""
    cluster, name = project["metadata"]["namespace"], project["metadata"]["name"]
    return f"{cluster}:{name}", cluster, name


def _collection_url(request: web.Request, pid: str) -> str:
    return f"{base_url(request)}/v3/projects/{pid}/secrets"


def _fields(pid: str, obj: Obj) -> dict[str, Any]:
    return shared.fields(obj, pid, _id(obj), secrets.name_of(obj), None)


def _render(request: web.Request, pid: str, obj: Obj) -> dict[str, Any]:
    return shared.render(
        base_url(request), SCHEMA, _fields(pid, obj), _collection_url(request, pid)
    )


def _id(obj: Obj) -> str:
    meta = obj["metadata"]
    return str(ScopedId(meta["labels"][names.LABEL_PROJECT_SECRET], secrets.name_of(obj)))


def _own(project: Obj, obj: Obj) -> bool:
    meta = project["metadata"]
    return secrets.source_project(obj) == (meta["namespace"], meta["name"])


async def _find(request: web.Request, project: Obj) -> Obj:
    pid, cluster, name = _where(project)
    secret_id = request.match_info["id"]
    wanted = ScopedId.parse_or_none(secret_id)
    missing = errors.not_found(f"secret {secret_id} not found in project {pid}")
    if wanted is None or wanted.namespace != name:
        raise missing
    stored = secrets.stored_name(cluster, name, wanted.name)
    try:
        obj = as_dict(
            await request.app[DEPS].kube.get(Secret, stored, namespace=names.SYSTEM_NAMESPACE)
        )
    except KubeApiError as exc:
        if exc.status.code == 404:
            raise missing from None
        raise
    if not _own(project, obj) or secrets.name_of(obj) != wanted.name:
        raise missing
    return obj


@routes.get(SECRETS)
async def list_secrets(request: web.Request) -> web.Response:
    project = visible_project(deps(request), caller(request), request.match_info["project"])
    pid, cluster, name = _where(project)
    listing = request.app[DEPS].kube.list(
        Secret,
        namespace=names.SYSTEM_NAMESPACE,
        labels={**secrets.project_secret_labels(cluster, name)},
    )
    objs = [obj for obj in [as_dict(o) async for o in listing] if _own(project, obj)]
    body = shared.collection(
        request, SCHEMA, pid, objs, _id, lambda o: _fields(pid, o),
        lambda o: _render(request, pid, o), _collection_url(request, pid),
    )  # fmt: skip
    return web.json_response(body)


@routes.get(SECRETS + "/{id}")
async def get_secret(request: web.Request) -> web.Response:
    project = visible_project(deps(request), caller(request), request.match_info["project"])
    obj = await _find(request, project)
    return web.json_response(_render(request, _where(project)[0], obj))


@routes.post(SECRETS)
async def create_secret(request: web.Request) -> web.Response:
    project = shared.writable_project(request, request.match_info["project"])
    pid, cluster, name = _where(project)
    body = await read_json(request)
    shared.check_type(body, SCHEMA)
    secret_name, spec = shared.created_spec(body)
    if project["metadata"].get("deletionTimestamp"):
        raise errors.invalid("projectId", f"project {pid} is being deleted", "InvalidState")
    if cluster == names.LOCAL_CLUSTER:
        raise errors.invalid(
            "projectId",
            f"the projects of {cluster} (the management cluster) have no project secrets: "
            "corral copies no Secret into its namespaces",
            "InvalidState",
        )
    manifest = secrets.project_secret(
        cluster, name, secret_name, spec, shared.creator_annotation(request)
    )
    taken = f"a secret {secret_name} already exists in the project"
    created = await shared.create(request.app[DEPS].kube, manifest, taken)
    return web.json_response(_render(request, pid, created), status=201)


@routes.put(SECRETS + "/{id}")
async def update_secret(request: web.Request) -> web.Response:
    """Replaces what the body gives, keeps the rest; written on condition that the Secret is
    still the version read (409 `Conflict` otherwise, and nothing changes)."""
    project = shared.writable_project(request, request.match_info["project"])
    current = await _find(request, project)
    body = await read_json(request)
    shared.check_type(body, SCHEMA)
    spec = shared.updated_spec(body, current, secrets.name_of(current), None)
    replaced = await request.app[DEPS].kube.replace(
        shared.as_secret(shared.replacement(current, spec))
    )
    return web.json_response(_render(request, _where(project)[0], as_dict(replaced)))


@routes.delete(SECRETS + "/{id}")
async def delete_secret(request: web.Request) -> web.Response:
    """The operator removes every copy once the Secret is gone."""
    project = shared.writable_project(request, request.match_info["project"])
    obj = await _find(request, project)
    meta = obj["metadata"]
    await delete_if_present(request.app[DEPS].kube, Secret, meta["name"], meta["namespace"])
    return web.Response(status=204)
