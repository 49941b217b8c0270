"""Secrets in one namespace of a project (issue 12), kept in the downstream cluster itself;
the id is `<namespace>:<name>`.

Every Secret of a type a team writes in the project's namespaces is one, whoever made it
(kubectl too), except corral's copies of project secrets and what the cluster or Helm keep
there for themselves (`secrets.is_namespaced_secret`). Membership comes from the API server's
watch of the cluster's namespaces; the Secrets themselves are read from the cluster on each
request, one listing per namespace of the project (a few at a time), so no API server holds a
cluster's secrets in memory. Reads go with corral's credential, writes as the caller
(docs/security.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Secret

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import text
from corral.apiserver.services import secrets as shared
from corral.apiserver.state.downstream import downstream_namespaces
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import secrets

TYPE = "namespacedSecret"
# Listings in flight at once to one cluster for one request.
LIST_CONCURRENCY = 8


def secret_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def placed(obj: Obj) -> tuple[str, str]:
    """Its name and namespace."""
    return obj["metadata"]["name"], obj["metadata"]["namespace"]


async def _members(deps: Deps, project: Obj) -> set[str]:
    """The project's namespaces that are not being deleted."""
    cluster = project["metadata"]["namespace"]
    cache = await downstream_namespaces(deps.connections, cluster)
    return {
        n["metadata"]["name"]
        for n in cache.by_index("project", str(ScopedId.of(project)))
        if not n["metadata"].get("deletionTimestamp")
    }


async def _reader(deps: Deps, project: Obj) -> AsyncClient:
    """corral's own client: read-only members see a secret's keys, which their `view` role
    downstream does not, and never its data, which corral leaves out."""
    return await deps.connections.client(project["metadata"]["namespace"])


async def _writer(deps: Deps, who: Caller, project: Obj) -> AsyncClient:
    """A client that acts as the caller: their write is judged by the cluster as theirs."""
    return await deps.connections.client_as(project["metadata"]["namespace"], who.downstream())


async def visible(deps: Deps, who: Caller, pid: str, query: Mapping[str, str]) -> list[Obj]:
    """The secrets of the project's namespaces (of one when the query's `namespaceId` names
    it, listing only that one); 404 without a role in the project."""
    project = shared.project(deps, who, pid, writing=False)
    members = await _members(deps, project)
    if namespace := query.get("namespaceId"):
        members &= {namespace}
    client = await _reader(deps, project)
    limit = asyncio.Semaphore(LIST_CONCURRENCY)

    async def listed(member: str) -> list[Obj]:
        async with limit:
            return [as_dict(o) async for o in client.list(Secret, namespace=member)]

    found = await asyncio.gather(*map(listed, sorted(members)))
    return [obj for objs in found for obj in objs if secrets.is_namespaced_secret(obj)]


async def find(deps: Deps, who: Caller, pid: str, wanted_id: str, writing: bool) -> Obj | None:
    """The secret `<namespace>:<name>` in a namespace of the project, if there is one."""
    project = shared.project(deps, who, pid, writing)
    wanted = ScopedId.parse_or_none(wanted_id)
    if wanted is None or wanted.namespace not in await _members(deps, project):
        return None
    client = await _reader(deps, project)
    try:
        obj = as_dict(await client.get(Secret, wanted.name, namespace=wanted.namespace))
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return obj if secrets.is_namespaced_secret(obj) else None


async def create(deps: Deps, who: Caller, pid: str, body: dict[str, Any]) -> Obj:
    project = shared.writable_project(deps, who, pid)
    shared.check_type(body, TYPE)
    namespace = text(body, "namespaceId", max_length=63, required=True)
    name, spec = shared.created_spec(body)
    if namespace not in await _members(deps, project):
        raise errors.invalid(
            "namespaceId",
            f"namespace {namespace} is not in project {ScopedId.of(project)}",
            "InvalidReference",
        )
    manifest = secrets.secret_body(name, namespace, spec, {}, shared.creator_annotation(who))
    client = await _writer(deps, who, project)
    taken = f"a secret {name} already exists in {namespace}"
    return await shared.create(client, manifest, taken)


async def update(deps: Deps, who: Caller, pid: str, current: Obj, body: dict[str, Any]) -> Obj:
    """Replaces what the body gives, keeps the rest; written on condition that the Secret is
    still the version read (409 `Conflict` otherwise, and nothing changes)."""
    shared.check_type(body, TYPE)
    meta = current["metadata"]
    spec = shared.updated_spec(body, current, meta["name"], meta["namespace"])
    client = await _writer(deps, who, shared.writable_project(deps, who, pid))
    return as_dict(await client.replace(shared.as_secret(shared.replacement(current, spec))))


async def delete(deps: Deps, who: Caller, pid: str, obj: Obj) -> None:
    meta = obj["metadata"]
    client = await _writer(deps, who, shared.writable_project(deps, who, pid))
    await delete_if_present(client, Secret, meta["name"], meta["namespace"])
