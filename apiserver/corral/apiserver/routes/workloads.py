"""`/v3/projects/{project_id}/workloads` (spec 2.8, 4.5): Deployments, StatefulSets,
DaemonSets, CronJobs and Jobs in the project's namespaces, as one flat resource.

Owners and members of the project create, change and delete them; read-only users list and
read them; anyone else gets 404. The mapping of fields is `corral.core.workloads`.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from aiohttp import web

from corral.apiserver.http import envelope
from corral.apiserver.http.body import read_input
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.resources.subscriptions import InProject
from corral.apiserver.services import workloads
from corral.apiserver.services.workloads import ACTIONS, Workload
from corral.apiserver.state.changes import Change
from corral.apiserver.state.downstream import workloads_cache
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj
from corral.core.workloads import render, spec
from corral.core.workloads.kinds import KINDS

SCHEMA = Schema(
    id="workload",
    plural="workloads",
    fields={
        "name": Field("dnsLabel", create=True, required=True),
        "namespaceId": Field("reference[namespace]", create=True, required=True),
        "workloadType": Field("enum", create=True, default="deployment", options=tuple(KINDS)),
        "containers": Field("array[container]", create=True, update=True, required=True),
        "scale": Field(
            "int",
            create=True,
            update=True,
            default=1,
            description="0 to the setting workload-max-scale (1000 unless changed); "
            "deployments and statefulSets",
        ),
        "labels": Field("map[string]", create=True, update=True),
        "annotations": Field("map[string]", create=True, update=True),
        "volumes": Field("array[volume]", create=True, update=True),
        "volumeClaimTemplates": Field("array[persistentVolumeClaim]", create=True, update=True),
        "schedule": Field("string", create=True, update=True, description="cronJobs"),
        "scheduling": Field("scheduling", create=True, update=True),
        **{
            flag: Field("boolean", create=True, update=True, description="as in a pod's spec")
            for flag in spec.POD_FLAGS
        },
        "securityContext": Field(
            "json", create=True, update=True, description="the pod's, as Kubernetes takes it"
        ),
        **{name: Field("string", create=True, update=True) for name in spec.POD_NAMES},
        "paused": readonly("boolean", "deployments: updates are held until resume"),
        "state": readonly("enum", "active, updating, paused or stopped"),
        "status": readonly("workloadStatus"),
        "publicEndpoints": readonly("array[publicEndpoint]"),
        "projectId": readonly("reference[project]"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={
        "pause": {},
        "resume": {},
        "redeploy": {},
        "rollback": {"input": "rollbackRevision"},
    },
    parent="project",
)
ROLLBACK = Schema(
    id="rollbackRevision",
    plural="rollbackRevisions",
    fields={
        "replicaSetId": Field(
            "string", create=True, required=True, description="replicaset:<namespace>:<name>"
        )
    },
    embedded=True,
)
REVISION = Schema(
    id="replicaSet",
    plural="replicaSets",
    fields={
        "name": readonly("string"),
        "namespaceId": readonly("reference[namespace]"),
        "revision": readonly("int"),
        "containers": readonly("array[container]"),
        "scale": readonly("int"),
        "current": readonly("boolean"),
    },
    parent="workload",
)
WORKLOADS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:workloads)}"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


def project_url(ask: Ask) -> str:
    return f"{ask.base}/v3/projects/{ask.path['project']}"


def url(ask: Ask, found: Workload) -> str:
    return f"{project_url(ask)}/workloads/{found.id}"


def fields(ask: Ask, found: Workload) -> dict[str, Any]:
    return {**render.fields(found.kind, found.obj), "projectId": found.where.project_id}


def detail(ask: Ask, found: Workload) -> dict[str, Any]:
    return {"publicEndpoints": workloads.public_endpoints(found.kind, found.obj, found.near)}


def links(ask: Ask, found: Workload) -> dict[str, str]:
    return {"revisions": f"{url(ask, found)}/revisions", "project": project_url(ask)}


def rendering_key(ask: Ask, found: Workload) -> Hashable:
    """A workload renders the same for one version of its object in one project while its
    namespace's Services, Ingresses and pods (its public endpoints) stand: a page of 50 of a
    project's workloads is looked up, not rendered, until one of them changes, and pods
    coming and going in another namespace leave it kept. The caches themselves are in the key
    (as `Derived` stamps hold them): a cluster connected again starts new ones, whose
    versions count from nothing again."""
    near, meta = found.near, found.obj["metadata"]
    namespace = meta["namespace"]
    return (found.where.project_id, found.kind.type, namespace, meta["name"],
            meta.get("resourceVersion"),
            *((cache, cache.touched("namespace", namespace))
              for cache in (near.services, near.ingresses, near.pods)))  # fmt: skip


FAMILY = Family[Workload](
    schema=SCHEMA,
    listed=lambda ask: workloads.visible(ask.deps, ask.who, ask.path["project"]),
    find=lambda ask, wid: workloads.find(ask.deps, ask.who, ask.path["project"], wid),
    fields=fields,
    ident=lambda found: found.id,
    detail=detail,
    url=url,
    links=links,
    rendering_key=rendering_key,
    # Whether the caller may change a workload, and which actions apply, are its project's
    # role's and its kind's: a page of 50 asks them once per kind.
    offers_alike=lambda found: found.kind.type,
    # Read-only members see a workload as it is: nothing to change, no action to take.
    actions=lambda ask, found: found.actions,
    create_url=lambda ask: f"{project_url(ask)}/workloads",
    before_create=lambda ask: workloads.may_create(ask.deps, ask.who, ask.path["project"]),
    create=lambda ask, body: workloads.create(ask.deps, ask.who, ask.path["project"], body),
    before_update=lambda ask, found: found.where.require_write("change workloads"),
    before_delete=lambda ask, found: found.where.require_write("delete workloads"),
    before_action=lambda ask, found, name: workloads.may_act(found, name),
    update=lambda ask, found, body: workloads.update(ask.deps, found, body),
    delete=lambda ask, found: workloads.delete(ask.deps, found),
    collection=WORKLOADS,
    within=lambda ask: f"project {ask.path['project']}",
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)


async def _changed(ask: Ask, change: Change) -> tuple[str, Workload] | None:
    kind = KINDS[change.cache.removeprefix("workloads:")]
    found = await workloads.changed(ask.deps, ask.who, change.cluster, kind, change.obj)
    return None if found is None else (found.where.project_id, found)


# `GET /v3/subscribe`: a workload's changes go to whoever has a role in its namespace's
# project, as `find`; from the first time its cluster's workloads are read (`state.downstream`).
SUBSCRIBABLE = InProject(
    FAMILY, caches=frozenset(workloads_cache(kind) for kind in KINDS.values()), found=_changed
)


@routes.post(WORKLOADS + "/{id}")
async def workload_action(request: web.Request) -> web.Response:
    asked, found = await handlers.found(FAMILY, request)
    name = action(request, set(ACTIONS))
    if name is None:
        raise errors.Unsupported("POST on a workload needs ?action=<name>")
    workloads.may_act(found, name)
    body = await read_input(request, ROLLBACK if name == "rollback" else name)
    return json_response(FAMILY.render(asked, await workloads.act(asked.deps, found, name, body)))


@routes.get(WORKLOADS + "/{id}/revisions")
async def list_revisions(request: web.Request) -> web.Response:
    asked, found = await handlers.found(FAMILY, request)
    revisions = await workloads.revisions(asked.deps, found)
    current = (found.obj["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION)
    revisions_url = f"{url(asked, found)}/revisions"
    body = envelope.collection(
        asked.base,
        REVISION,
        revisions,
        lambda rs: f"replicaset:{ScopedId.of(rs)}",
        lambda rs: _revision_fields(rs, current),
        lambda rs: envelope.resource(asked.base, REVISION, _revision_fields(rs, current)),
        request.query,
        revisions_url,
        can_create=False,
        default_sort="revision",
        newest_first=True,
    )
    body["links"] = {"self": revisions_url}
    return json_response(body)


def _revision_fields(rs: Obj, current: str | None) -> dict[str, Any]:
    meta = rs["metadata"]
    revision = (meta.get("annotations") or {}).get(REVISION_ANNOTATION, "0")
    containers = rs["spec"]["template"]["spec"].get("containers") or []
    return {
        "id": f"replicaset:{ScopedId.of(rs)}",
        "name": meta["name"],
        "namespaceId": meta["namespace"],
        "revision": int(revision) if revision.isdigit() else 0,
        "containers": [{"name": c["name"], "image": c.get("image", "")} for c in containers],
        "scale": rs["spec"].get("replicas", 0),
        "current": revision == current,
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }
