"""`/v3/clusters/{cluster_id}/namespaces` (spec 4.6): the cluster's own namespaces, and their
project membership, the annotation `field.svc.io/projectId: <cluster>:<project>`.

Creating a namespace in a project, or moving one into it, is checked against the project's
quota and gives it the project's Pod Security labels (`services.namespaces`).
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.objects import name_of
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import namespaces
from corral.apiserver.services.visibility import visible_cluster
from corral.core.kube.informer import Obj

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


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    meta = obj["metadata"]
    name = name_of(obj)
    return {
        "id": name,
        "name": name,
        "projectId": namespaces.project_of(obj),
        "clusterId": ask.path["cluster"],
        "state": "removing" if meta.get("deletionTimestamp") else "active",
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def links(ask: Ask, obj: Obj) -> dict[str, str]:
    project = namespaces.project_of(obj)
    return {"project": f"{ask.base}/v3/projects/{project}"} if project else {}


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: namespaces.visible(
        ask.deps, ask.who, ask.path["cluster"], ask.query.get("projectId")
    ),
    find=lambda ask, name: namespaces.find(ask.deps, ask.who, ask.path["cluster"], name),
    fields=fields,
    ident=name_of,
    url=lambda ask, obj: f"{ask.base}/v3/clusters/{ask.path['cluster']}/namespaces/{name_of(obj)}",
    links=links,
    may_create=lambda ask: namespaces.may_create(
        ask.who, ask.path["cluster"], ask.query.get("projectId")
    ),
    create_url=lambda ask: f"{ask.base}/v3/clusters/{ask.path['cluster']}/namespaces",
    before_create=lambda ask: visible_cluster(ask.deps, ask.who, ask.path["cluster"]),
    create=lambda ask, body: namespaces.create(ask.deps, ask.who, ask.path["cluster"], body),
    before_update=lambda ask, obj: namespaces.may_alter(ask.who, ask.path["cluster"], obj, "move"),
    before_delete=lambda ask, obj: namespaces.may_alter(
        ask.who, ask.path["cluster"], obj, "delete"
    ),
    update=lambda ask, obj, body: namespaces.move(
        ask.deps, ask.who, ask.path["cluster"], obj, body
    ),
    delete=lambda ask, obj: namespaces.delete(ask.deps, ask.who, ask.path["cluster"], obj),
    collection=NAMESPACES,
    within=lambda ask: f"cluster {ask.path['cluster']}",
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)
