"""`/v3/projects` (spec 2.9, 4.6 and 6): create, list, get (with usage), update, delete, and
the project's events.

A project is a `Project` in the namespace named after its cluster; its id is
`<cluster>:<project>`. Quota changes are checked against what the project's namespaces have
and use, so a change that would not fit is refused before anything is written; the write is
conditional on the version checked (`services.admission`), so no concurrent change slips
between. The creator's owner binding is made with the project (`services.projects`), so the
creator sees it at once.
"""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Event

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import (
    description_text,
    either,
    name_text,
    or_empty,
    read_json,
    referenced,
)
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import admission, projects
from corral.apiserver.services import podsecurity as pod_security
from corral.apiserver.services.admission import default_of, limit_of, project_id
from corral.apiserver.services.visibility import owned_project, visible_cluster, visible_project
from corral.apiserver.state.downstream import downstream_namespaces
from corral.core import errors, times
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import defaults, podsecurity, quota, status

QUOTA_PARTS = ("resourceQuota", "namespaceDefaultResourceQuota", "containerDefaultResourceLimit")
SCHEMA = Schema(
    id="project",
    plural="projects",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "displayName": Field("string", create=True, update=True, required=True),
        "description": Field("string", create=True, update=True),
        "clusterId": Field("reference[cluster]", create=True, required=True),
        "resourceQuota": Field("projectResourceQuota", create=True, update=True),
        "namespaceDefaultResourceQuota": Field("namespaceResourceQuota", create=True, update=True),
        "containerDefaultResourceLimit": Field("containerResourceLimit", create=True, update=True),
        podsecurity.PROJECT_FIELD: Field(
            "enum",
            create=True,
            update=True,
            options=("", *podsecurity.LEVELS),
            description="Pod Security level of the project's namespaces; empty for the "
            "cluster's. Only administrators may set privileged or loosen the cluster's",
        ),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "usage": readonly("json", "With ?include=usage: used and hard per quota field"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
)
EVENT = Schema(
    id="event",
    plural="events",
    fields={
        "eventType": readonly("enum", "Normal or Warning"),
        "reason": readonly("string"),
        "message": readonly("string"),
        "count": readonly("int"),
        "firstTimestamp": readonly("date"),
        "lastTimestamp": readonly("date"),
        "namespaceId": readonly("string", "Namespace of the object, empty for the project"),
        "involvedObject": readonly("json", "kind, name, namespace of the object"),
        "source": readonly("string", "The component that reported it"),
        "origin": readonly("enum", "project (the Project itself) or cluster (its namespaces)"),
    },
    parent="project",
)

routes = web.RouteTableDef()


def state(obj: Obj) -> tuple[str, str, str]:
    if obj["metadata"].get("deletionTimestamp"):
        return "removing", "yes", "deleting the project's namespaces"
    conds = (obj.get("status") or {}).get("conditions") or []
    if status.all_true(conds):
        return "active", "no", ""
    waiting = [c for c in conds if c.get("status") != "True"]
    message = "; ".join(f"{c['type']}: {c.get('message', '')}" for c in waiting)
    return "initializing", "yes", message or "waiting for the operator"


def fields(obj: Obj) -> dict[str, Any]:
    """The resource's fields short of the custom resource's metadata, spec and status:
    small, so collections filter and sort by them."""
    spec = obj.get("spec") or {}
    current, transitioning, message = state(obj)
    return {
        "id": project_id(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "clusterId": obj["metadata"]["namespace"],
        **{part: spec.get(part) for part in QUOTA_PARTS},
        podsecurity.PROJECT_FIELD: spec.get(podsecurity.PROJECT_FIELD, ""),
        "state": current,
        "transitioning": transitioning,
        "transitioningMessage": message,
        **object_stamp(obj),
    }


def render(request: web.Request, obj: Obj, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    base, pid, cluster = base_url(request), project_id(obj), obj["metadata"]["namespace"]
    body = {
        **fields(obj),
        **object_fields(
            obj, ("name", "namespace", "creationTimestamp", "labels", "annotations", "uid")
        ),
    }
    if usage is not None:
        body["usage"] = usage
    links = {
        "namespaces": f"{base}/v3/clusters/{cluster}/namespaces?projectId={pid}",
        "projectRoleTemplateBindings": f"{base}/v3/projectroletemplatebindings?projectId={pid}",
        "events": f"{base}/v3/projects/{pid}/events",
        "workloads": f"{base}/v3/projects/{pid}/workloads",
        "pods": f"{base}/v3/projects/{pid}/pods",
        "secrets": f"{base}/v3/projects/{pid}/secrets",
        "namespacedSecrets": f"{base}/v3/projects/{pid}/namespacedSecrets",
        "cluster": f"{base}/v3/clusters/{cluster}",
    }
    return envelope.resource(base, SCHEMA, body, links=links)


def quota_spec(body: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The quota parts of a project spec after applying `body` to `current`, validated."""
    merged = {part: current.get(part) for part in QUOTA_PARTS if current.get(part)}
    for part in ("resourceQuota", "namespaceDefaultResourceQuota"):
        if part in body:
            value = or_empty(body[part], {})
            if not isinstance(value, dict):
                raise quota.QuotaError(f"{part} must be an object with a limit", part)
            limits = quota.parse_limits(value.get("limit"), f"{part}.limit")
            merged[part] = {"limit": limits} if limits else None
    if "containerDefaultResourceLimit" in body:
        field = "containerDefaultResourceLimit"
        defaults_ = quota.parse_limits(body[field], field, quota.CONTAINER_DEFAULT_FIELDS)
        quota.check_container_defaults(defaults_)
        merged[field] = defaults_ or None
    quota.check_project_quota(limit_of(merged), default_of(merged))
    return merged


@routes.get(v3("projects"))
async def list_projects(request: web.Request) -> web.Response:
    allowed, stores = access(request), request.app[DEPS].stores
    cluster = request.query.get("clusterId")
    objs = stores.projects.by_index("cluster", cluster) if cluster else stores.projects.all()
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        (o for o in objs if allowed.project_role(project_id(o))),
        project_id,
        fields,
        lambda o: render(request, o),
        request.query,
        request.path,
        can_create=True,
    )
    return web.json_response(body)


@routes.get(v3("projects", "/{id}"))
async def get_project(request: web.Request) -> web.Response:
    obj = visible_project(deps(request), caller(request), request.match_info["id"])
    usage = None
    if "usage" in request.query.getall("include", []):
        usage = await admission.usage(request, obj)
    return web.json_response(render(request, obj, usage))


@routes.post(v3("projects"))
async def create_project(request: web.Request) -> web.Response:
    who, allowed = principal(request), access(request)
    body = await read_json(request)
    if body.get("type", "project") != "project":
        raise errors.invalid("type", "type must be project")
    display = name_text(body, "displayName") or name_text(body, "name")
    if not display:
        raise errors.missing("displayName")
    cluster = either(body, ("clusterId", "clusterName"), 63)
    referenced(
        lambda: visible_cluster(deps(request), caller(request), cluster),
        "clusterId",
        f"cluster {cluster}",
    )
    if allowed.cluster_role(cluster) is None:
        raise errors.forbidden(f"only members of cluster {cluster} may create projects in it")
    spec: dict[str, Any] = {
        "displayName": display,
        "description": description_text(body),
        "clusterName": cluster,
        **{k: v for k, v in quota_spec(body, {}).items() if v},
    }
    if level := pod_security.chosen_level(request, body, cluster):
        spec[podsecurity.PROJECT_FIELD] = level
    created = await projects.create_project(request, cluster, spec, who.user_id)
    return web.json_response(render(request, created), status=201)


@routes.put(v3("projects", "/{id}"))
async def update_project(request: web.Request) -> web.Response:
    """Changes are checked against, and written on condition of, one version of the Project:
    two PUTs at once both land (the second is checked and merged again) or one gets 409."""
    pid = request.match_info["id"]
    obj = owned_project(deps(request), caller(request), pid, "change it")
    body = await read_json(request)
    spec = obj.get("spec") or {}
    for field in ("clusterId", "clusterName"):
        if field in body and body[field] != spec.get("clusterName"):
            raise errors.invalid(field, "a project cannot move to another cluster", "InvalidAction")
    fixed: dict[str, Any] = {}
    display = name_text(body, "displayName") or name_text(body, "name")
    if display:
        fixed["displayName"] = display
    if "description" in body:
        fixed["description"] = description_text(body)
    if podsecurity.PROJECT_FIELD in body:
        fixed[podsecurity.PROJECT_FIELD] = pod_security.chosen_level(
            request, body, spec["clusterName"], spec.get(podsecurity.PROJECT_FIELD, "")
        )

    async def change(current: Obj) -> list[dict[str, Any]]:
        patch = dict(fixed)
        if any(part in body for part in QUOTA_PARTS):
            merged = quota_spec(body, current.get("spec") or {})
            await admission.check_quota_change(request, current, merged)
            patch |= {part: merged.get(part) or {} for part in QUOTA_PARTS}
        return [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in patch.items()]

    obj = await admission.update(request, obj, change)
    return web.json_response(render(request, obj))


@routes.delete(v3("projects", "/{id}"))
async def delete_project(request: web.Request) -> web.Response:
    pid = request.match_info["id"]
    obj = owned_project(deps(request), caller(request), pid, "delete it")
    role = (obj["metadata"].get("labels") or {}).get(defaults.LABEL_ROLE)
    if role:
        raise ApiError(422, "InvalidAction", f"the {role} project of a cluster cannot be deleted")
    meta = obj["metadata"]
    await delete_if_present(request.app[DEPS].kube, kinds.Project, meta["name"], meta["namespace"])
    return web.Response(status=204)


# -- events -------------------------------------------------------------------------------------


@routes.get(v3("projects", "/{id}/events"))
async def project_events(request: web.Request) -> web.Response:
    """The events of the Project itself (management cluster) and of everything in its
    namespaces (its cluster), newest first."""
    obj = visible_project(deps(request), caller(request), request.match_info["id"])
    cluster, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    own = request.app[DEPS].kube.list(
        Event, namespace=cluster, fields={"involvedObject.name": name}
    )
    items = [event_fields(as_dict(e), "project") async for e in own]
    members = {
        n["metadata"]["name"]
        for n in (await downstream_namespaces(request.app[DEPS].connections, cluster)).by_index(
            "project", project_id(obj)
        )
    }
    if members:
        client: AsyncClient = await request.app[DEPS].connections.client(cluster)
        try:
            async for event in client.list(Event, namespace="*"):
                data = as_dict(event)
                if data["metadata"].get("namespace") in members:
                    items.append(event_fields(data, "cluster"))
        except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is a 503
            raise ApiError(
                503, "ClusterUnavailable", f"cannot read events of cluster {cluster}: {exc}"
            ) from None
    body = envelope.collection(
        base_url(request),
        EVENT,
        items,
        lambda item: item["id"],
        lambda item: item,
        lambda item: render_event(request, item),
        request.query,
        request.path,
        can_create=False,
        default_sort="lastTimestamp",
        newest_first=True,
    )
    return web.json_response(body)


def event_fields(event: Obj, origin: str) -> dict[str, Any]:
    """All of an event's fields: each is small, so collections filter and sort by the whole."""
    meta, involved = event["metadata"], event.get("involvedObject") or {}
    last = event.get("lastTimestamp") or event.get("eventTime") or meta.get("creationTimestamp")
    return {
        "id": meta.get("uid") or meta["name"],
        "eventType": event.get("type", ""),
        "reason": event.get("reason", ""),
        "message": event.get("message", ""),
        "count": event.get("count") or 1,
        "firstTimestamp": _time(event.get("firstTimestamp") or last),
        "lastTimestamp": _time(last),
        "namespaceId": meta.get("namespace", "") if origin == "cluster" else "",
        "involvedObject": {k: involved.get(k, "") for k in ("kind", "name", "namespace")},
        "source": (event.get("source") or {}).get("component")
        or event.get("reportingComponent", ""),
        "origin": origin,
    }


def render_event(request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
    rendered = envelope.resource(base_url(request), EVENT, body)
    rendered["links"] = {}
    return rendered


def _time(value: Any) -> str:
    """lightkube gives event times as datetimes: the wire has Kubernetes' text form."""
    return times.format_time(value) if isinstance(value, datetime.datetime) else str(value or "")
