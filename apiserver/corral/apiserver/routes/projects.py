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

from corral.apiserver.http import envelope
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.resources.subscriptions import Subscribable
from corral.apiserver.services import admission, projects
from corral.apiserver.services.admission import project_id
from corral.apiserver.services.projects import QUOTA_PARTS
from corral.apiserver.services.visibility import seen_project
from corral.core import times
from corral.core.kube.informer import Obj
from corral.core.projects import podsecurity, status

SCHEMA = Schema(
    id="project",
    plural="projects",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "displayName": Field("string", create=True, update=True, required=True),
        "description": Field("string", create=True, update=True),
        "clusterId": Field("reference[cluster]", create=True, required=True),
        "clusterName": Field(
            "reference[cluster]", create=True, write_only=True, description="Alias of clusterId"
        ),
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


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    """The resource's fields short of the custom resource's metadata, spec and status:
    small, so collections filter and sort by them."""
    spec = obj.get("spec") or {}
    return {
        "id": project_id(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "clusterId": obj["metadata"]["namespace"],
        **{part: spec.get(part) for part in QUOTA_PARTS},
        podsecurity.PROJECT_FIELD: spec.get(podsecurity.PROJECT_FIELD, ""),
        **object_stamp(obj),
    }


def detail(ask: Ask, obj: Obj) -> dict[str, Any]:
    return object_fields(
        obj, ("name", "namespace", "creationTimestamp", "labels", "annotations", "uid")
    )


def links(ask: Ask, obj: Obj) -> dict[str, str]:
    base, pid, cluster = ask.base, project_id(obj), obj["metadata"]["namespace"]
    return {
        "namespaces": f"{base}/v3/clusters/{cluster}/namespaces?projectId={pid}",
        "projectRoleTemplateBindings": f"{base}/v3/projectroletemplatebindings?projectId={pid}",
        "events": f"{base}/v3/projects/{pid}/events",
        "workloads": f"{base}/v3/projects/{pid}/workloads",
        "pods": f"{base}/v3/projects/{pid}/pods",
        "secrets": f"{base}/v3/projects/{pid}/secrets",
        "namespacedSecrets": f"{base}/v3/projects/{pid}/namespacedSecrets",
        "cluster": f"{base}/v3/clusters/{cluster}",
    }


async def usage(ask: Ask, obj: Obj) -> dict[str, Any]:
    if "usage" not in ask.query.getall("include", []):
        return {}
    return {"usage": await admission.usage(ask.deps, obj)}


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: projects.visible(ask.deps, ask.who, ask.query.get("clusterId")),
    find=lambda ask, pid: seen_project(ask.deps, ask.who, pid),
    fields=fields,
    ident=project_id,
    state=status.state,
    detail=detail,
    links=links,
    include=usage,
    create=lambda ask, body: projects.create(ask.deps, ask.who, body),
    before_update=lambda ask, obj: projects.may_change(ask.who, obj),
    before_delete=lambda ask, obj: projects.may_delete(ask.who, obj),
    update=lambda ask, obj, body: projects.update(ask.deps, ask.who, obj, body),
    delete=lambda ask, obj: projects.delete(ask.deps, ask.who, obj),
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)

# `GET /v3/subscribe`: a project's changes go to whoever has a role in it, as `listed`. Its
# creator's role may reach the app after the project does: the create event is then withheld
# from them, and they get its next change (the operator's first status write, within seconds).
SUBSCRIBABLE = Subscribable(
    FAMILY,
    cache="projects",
    sees=lambda ask, obj: ask.who.access.project_role(project_id(obj)) is not None,
)


@routes.get(FAMILY.collection_route + "/{id}/events")
async def project_events(request: web.Request) -> web.Response:
    """The events of the Project itself and of everything in its namespaces, newest first."""
    asked, obj = await handlers.found(FAMILY, request)
    body = envelope.collection(
        asked.base,
        EVENT,
        [event_fields(event, origin) for origin, event in await projects.events(asked.deps, obj)],
        lambda item: item["id"],
        lambda item: item,
        lambda item: render_event(asked, item),
        request.query,
        request.path,
        can_create=False,
        default_sort="lastTimestamp",
        newest_first=True,
    )
    return json_response(body)


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


def render_event(ask: Ask, body: dict[str, Any]) -> dict[str, Any]:
    rendered = envelope.resource(ask.base, EVENT, body)
    rendered["links"] = {}
    return rendered


def _time(value: Any) -> str:
    """lightkube gives event times as datetimes: the wire has Kubernetes' text form."""
    return times.format_time(value) if isinstance(value, datetime.datetime) else str(value or "")
