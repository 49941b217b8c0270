"""`/v3/clusters/{cluster_id}/namespaces` (spec 4.6): the cluster's own namespaces, and their
project membership, the annotation `field.svc.io/projectId: <cluster>:<project>`.

Reads come from the API server's watch of the cluster's namespaces. Creating a namespace in a
project, or moving one into it, is checked against the project's quota first: one more
namespace takes one more namespace default, which must fit in the project's limit. The check
reserves the room on the Project with a resourceVersion precondition (`services.admission`),
so two requests, on any replicas, cannot both take the last room.

A namespace created in or moved into a project gets the project's Pod Security labels in the
same write (`services.podsecurity`), so it never runs a pod unjudged; one moved out keeps them.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import read_json, text
from corral.apiserver.http.objects import name_of
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.services import podsecurity as pod_security
from corral.apiserver.services.admission import admitted
from corral.apiserver.services.visibility import visible_cluster
from corral.apiserver.state.downstream import downstream_namespaces
from corral.core import errors
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import roles

SCHEMA = Schema(
    id="namespace",
    plural="namespaces",
    fields={
        "name": Field("dnsLabel", create=True, required=True),
        "projectId": Field("reference[project]", create=True, update=True),
        "clusterId": readonly("reference[cluster]"),
        "state": readonly("enum", "active or removing"),
        "labels": readonly("map[string]"),
        "annotations": readonly("map[string]"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    parent="cluster",
)
NAMESPACES = "/v3/{clusters:(?i:clusters)}/{cluster}/{type:(?i:namespaces)}"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

routes = web.RouteTableDef()


def fields(cluster: str, obj: Obj) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    meta = obj["metadata"]
    name = name_of(obj)
    return {
        "id": name,
        "name": name,
        "projectId": (meta.get("annotations") or {}).get(names.ANNOTATION_PROJECT),
        "clusterId": cluster,
        "state": "removing" if meta.get("deletionTimestamp") else "active",
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def render(request: web.Request, cluster: str, obj: Obj) -> dict[str, Any]:
    body, name = fields(cluster, obj), name_of(obj)
    base = base_url(request)
    rendered = envelope.resource(base, SCHEMA, body)
    url = f"{base}/v3/clusters/{cluster}/namespaces/{name}"
    rendered["links"] = {"self": url, "update": url, "remove": url}
    if body["projectId"]:
        rendered["links"]["project"] = f"{base}/v3/projects/{body['projectId']}"
    return rendered


def may_see(request: web.Request, cluster: str, obj: Obj) -> bool:
    """Cluster members see every namespace; others those of projects they are bound to."""
    allowed = access(request)
    if allowed.cluster_role(cluster) is not None:
        return True
    project = (obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_PROJECT)
    return isinstance(project, str) and allowed.project_role(project) is not None


def may_change(request: web.Request, cluster: str, project: str | None) -> bool:
    """Namespaces of a project are changed by its owners and members; namespaces outside
    every project by the cluster's owners."""
    allowed = access(request)
    if project:
        return roles.may_write_namespaces(allowed.project_role(project))
    return allowed.cluster_role(cluster) == roles.CLUSTER_OWNER


def target_project(request: web.Request, cluster: str, value: Any) -> str | None:
    """The `projectId` of a body, checked: a project of this cluster the caller can see."""
    if value in (None, ""):
        return None
    pid = ScopedId.parse_or_none(value)
    if pid is None or pid.namespace != cluster:
        raise errors.invalid("projectId", f"projectId must be a project of cluster {cluster}")
    project = request.app[DEPS].stores.projects.get(pid.key)
    if project is None or access(request).project_role(value) is None:
        raise errors.invalid("projectId", f"project {value} not found", "InvalidReference")
    if project["metadata"].get("deletionTimestamp"):
        raise errors.invalid("projectId", f"project {value} is being deleted", "InvalidState")
    return str(pid)


def _membership(cluster: str, project: str | None) -> dict[str, Any]:
    """Annotation (the contract) and label (for selectors) of a namespace in `project`."""
    name = ScopedId.parse(project).name if project else None
    return {
        "annotations": {names.ANNOTATION_PROJECT: project},
        "labels": {names.LABEL_PROJECT: name},
    }


async def find(request: web.Request) -> tuple[str, Obj]:
    cluster = request.match_info["cluster"]
    visible_cluster(deps(request), caller(request), cluster)
    name = request.match_info["namespace"]
    obj = (await downstream_namespaces(request.app[DEPS].connections, cluster)).get(name)
    if obj is None or not may_see(request, cluster, obj):
        raise errors.not_found(f"namespace {name} not found in cluster {cluster}")
    return cluster, obj


@routes.get(NAMESPACES)
async def list_namespaces(request: web.Request) -> web.Response:
    cluster = request.match_info["cluster"]
    visible_cluster(deps(request), caller(request), cluster)
    cache = await downstream_namespaces(request.app[DEPS].connections, cluster)
    project = request.query.get("projectId")
    objs = cache.by_index("project", project) if project else cache.all()
    can_create = access(request).cluster_role(cluster) is not None or bool(project)
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        (o for o in objs if may_see(request, cluster, o)),
        name_of,
        lambda o: fields(cluster, o),
        lambda o: render(request, cluster, o),
        request.query,
        request.path,
        can_create=can_create,
    )
    return web.json_response(body)


@routes.get(NAMESPACES + "/{namespace}")
async def get_namespace(request: web.Request) -> web.Response:
    cluster, obj = await find(request)
    return web.json_response(render(request, cluster, obj))


@routes.post(NAMESPACES)
async def create_namespace(request: web.Request) -> web.Response:
    cluster = request.match_info["cluster"]
    visible_cluster(deps(request), caller(request), cluster)
    body = await read_json(request)
    if body.get("type", "namespace") != "namespace":
        raise errors.invalid("type", "type must be namespace")
    name = text(body, "name", max_length=63, required=True)
    if not DNS_LABEL.match(name):
        raise errors.invalid(
            "name", "name must be lower-case letters, digits and '-', starting and ending "
            "with a letter or digit (at most 63)",
        )  # fmt: skip
    project = target_project(request, cluster, body.get("projectId"))
    if not may_change(request, cluster, project):
        raise errors.forbidden(
            f"you may not create namespaces in {project or f'cluster {cluster} outside projects'}"
        )
    connections = request.app[DEPS].connections
    cache = await downstream_namespaces(connections, cluster)
    if cache.get(name) is not None:
        raise errors.conflict(f"namespace {name} already exists in cluster {cluster}")
    membership = _membership(cluster, project)
    membership["labels"] |= pod_security.labels_for(request, project)
    namespace = Namespace(
        metadata=ObjectMeta(
            name=name,
            annotations={k: v for k, v in membership["annotations"].items() if v},
            labels={k: v for k, v in membership["labels"].items() if v},
        )
    )
    async with admitted(request, project, name):
        created = as_dict(await (await connections.client(cluster)).create(namespace))
    cache.put(created)
    return web.json_response(render(request, cluster, created), status=201)


@routes.put(NAMESPACES + "/{namespace}")
async def move_namespace(request: web.Request) -> web.Response:
    """Moves the namespace into `projectId`, or out of every project with an empty value."""
    cluster, obj = await find(request)
    body = await read_json(request)
    if "projectId" not in body:
        return web.json_response(render(request, cluster, obj))
    current = (obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_PROJECT)
    project = target_project(request, cluster, body["projectId"])
    if project == current:
        return web.json_response(render(request, cluster, obj))
    for side in (current, project):
        if not may_change(request, cluster, side):
            raise errors.forbidden(
                f"you may not move namespaces {'out of' if side == current else 'into'} "
                f"{side or f'cluster {cluster} outside projects'}"
            )
    connections = request.app[DEPS].connections
    client = await connections.client(cluster)
    membership = _membership(cluster, project)
    membership["labels"] |= pod_security.labels_for(request, project)
    async with admitted(request, project, obj["metadata"]["name"]):
        moved = as_dict(
            await client.patch(
                Namespace,
                obj["metadata"]["name"],
                {"metadata": membership},
                patch_type=PatchType.MERGE,
            )
        )
    (await downstream_namespaces(connections, cluster)).put(moved)
    return web.json_response(render(request, cluster, moved))


@routes.delete(NAMESPACES + "/{namespace}")
async def delete_namespace(request: web.Request) -> web.Response:
    cluster, obj = await find(request)
    project = (obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_PROJECT)
    if not may_change(request, cluster, project):
        raise errors.forbidden(f"you may not delete namespaces of {project or cluster}")
    client = await request.app[DEPS].connections.client(cluster)
    await delete_if_present(client, Namespace, obj["metadata"]["name"])
    return web.Response(status=204)
