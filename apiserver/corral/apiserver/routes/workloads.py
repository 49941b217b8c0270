"""`/v3/projects/{project_id}/workloads` (spec 2.8, 4.5): Deployments, StatefulSets,
DaemonSets, CronJobs and Jobs in the project's namespaces, as one flat resource.

Owners and members of the project create, change and delete them; read-only users list and
read them; anyone else gets 404. The mapping of fields is `corral.core.workloads`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.resources.apps_v1 import ReplicaSet

from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import read_json, text
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.services import workloads
from corral.apiserver.services.workloads import Neighbours, Scope
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.workloads import render, spec
from corral.core.workloads.kinds import DEPLOYMENT, KINDS, Kind, WorkloadId, check_name, kind_named

ACTIONS = ("pause", "resume", "redeploy", "rollback")
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

routes = web.RouteTableDef()


def project_url(request: web.Request, where: Scope) -> str:
    return f"{base_url(request)}/v3/projects/{where.project_id}"


def render_workload(
    request: web.Request, where: Scope, kind: Kind, obj: Obj, near: Neighbours
) -> dict[str, Any]:
    body = render.fields(kind, obj)
    body["projectId"] = where.project_id
    body["publicEndpoints"] = workloads.public_endpoints(kind, obj, near)
    url = f"{project_url(request, where)}/workloads/{body['id']}"
    rendered = envelope.resource(base_url(request), SCHEMA, body)
    rendered["links"] = {
        "self": url,
        "revisions": f"{url}/revisions",
        "project": project_url(request, where),
    }
    rendered["actions"] = {}
    if where.writable:
        rendered["links"] |= {"update": url, "remove": url}
        rendered["actions"] = {a: f"{url}?action={a}" for a in applicable(kind)}
    return rendered


async def shown(request: web.Request, where: Scope, kind: Kind, obj: Obj) -> dict[str, Any]:
    """One workload, rendered."""
    return render_workload(request, where, kind, obj, await workloads.neighbours(request, where))


def applicable(kind: Kind) -> tuple[str, ...]:
    if kind.type == DEPLOYMENT:
        return ACTIONS
    return ("redeploy",) if kind.rolls_out else ()


@routes.get(WORKLOADS)
async def list_workloads(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    near = await workloads.neighbours(request, where)

    def fields(item: tuple[Kind, Obj]) -> dict[str, Any]:
        return {**render.fields(*item), "projectId": where.project_id}

    body = envelope.collection(
        base_url(request),
        SCHEMA,
        await workloads.listed(request, where),
        lambda item: str(WorkloadId.of(*item)),
        fields,
        lambda item: render_workload(request, where, *item, near),
        request.query,
        request.path,
        can_create=where.writable,
    )
    return web.json_response(body)


@routes.get(WORKLOADS + "/{workload}")
async def get_workload(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    kind, obj = await workloads.find(request, where, request.match_info["workload"])
    return web.json_response(await shown(request, where, kind, obj))


@routes.post(WORKLOADS)
async def create_workload(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    where.require_write("create workloads")
    body = await read_json(request)
    if body.get("type", "workload") != "workload":
        raise errors.invalid("type", "type must be workload")
    kind = kind_named(text(body, "workloadType", max_length=64) or DEPLOYMENT)
    name = check_name(body.get("name"), kind)
    namespace = await workloads.target_namespace(request, where, body.get("namespaceId"))
    if (await workloads.cache_of(request, where, kind)).get(f"{namespace}/{name}"):
        raise errors.conflict(f"workload {kind.type}:{namespace}:{name} already exists")
    obj = spec.build(kind, namespace, name, body)
    workloads.check_bounds(request, kind, obj)
    await workloads.admit(request, where, kind, obj, None)
    created = await workloads.create(request, where, kind, obj)
    return web.json_response(await shown(request, where, kind, created), status=201)


@routes.put(WORKLOADS + "/{workload}")
async def update_workload(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    kind, obj = await workloads.find(request, where, request.match_info["workload"])
    where.require_write("change workloads")
    body = await read_json(request)
    for field, now in (
        ("name", obj["metadata"]["name"]),
        ("workloadType", kind.type),
        ("namespaceId", obj["metadata"]["namespace"]),
    ):
        if body.get(field) not in (None, now):
            raise errors.invalid(field, f"{field} cannot be changed (it is {now})")
    changed = spec.merge(kind, obj, body)
    workloads.check_bounds(request, kind, changed)
    if kind.pod_template(changed) != kind.pod_template(obj) or body.get("scale") is not None:
        await workloads.admit(request, where, kind, changed, obj)
    replaced = await workloads.update(
        request, where, kind, obj, lambda current: spec.merge(kind, current, body)
    )
    return web.json_response(await shown(request, where, kind, replaced))


@routes.delete(WORKLOADS + "/{workload}")
async def delete_workload(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    kind, obj = await workloads.find(request, where, request.match_info["workload"])
    where.require_write("delete workloads")
    await workloads.delete(request, where, kind, obj)
    return web.Response(status=204)


@routes.post(WORKLOADS + "/{workload}")
async def workload_action(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    kind, obj = await workloads.find(request, where, request.match_info["workload"])
    name = action(request, set(ACTIONS))
    if name is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a workload needs ?action=<name>")
    where.require_write(f"{name} workloads")
    if name not in applicable(kind):
        raise ApiError(422, "InvalidAction", f"{name} does not apply to a {kind.type}")
    body = await read_json(request)
    template: Obj | None = None
    if name == "rollback":
        revision = await _revision(request, where, obj, body.get("replicaSetId"))
        template = revision["spec"]["template"]
        template["metadata"].get("labels", {}).pop("pod-template-hash", None)

    def change(current: Obj) -> Obj:
        changed = spec.merge(kind, current, {})
        if name in ("pause", "resume"):
            changed["spec"]["paused"] = name == "pause"
        elif name == "redeploy":
            changed = workloads.redeployed(kind, changed)
        else:
            changed["spec"]["template"] = template
        return changed

    if name in ("redeploy", "rollback"):  # new pods, judged as they will be
        await workloads.admit(request, where, kind, change(obj), obj)
    replaced = await workloads.update(request, where, kind, obj, change)
    return web.json_response(await shown(request, where, kind, replaced))


@routes.get(WORKLOADS + "/{workload}/revisions")
async def list_revisions(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    kind, obj = await workloads.find(request, where, request.match_info["workload"])
    if kind.type != DEPLOYMENT:
        raise ApiError(422, "InvalidAction", f"a {kind.type} keeps no revisions")
    revisions = await _revisions(request, where, obj)
    current = (obj["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION)
    url = f"{project_url(request, where)}/workloads/{WorkloadId.of(kind, obj)}/revisions"

    def rendered(rs: Obj) -> dict[str, Any]:
        return envelope.resource(base_url(request), REVISION, _revision_fields(rs, current))

    body = envelope.collection(
        base_url(request),
        REVISION,
        revisions,
        lambda rs: f"replicaset:{ScopedId.of(rs)}",
        lambda rs: _revision_fields(rs, current),
        rendered,
        request.query,
        url,
        can_create=False,
        default_sort="revision",
        newest_first=True,
    )
    body["links"] = {"self": url}
    return web.json_response(body)


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


async def _revisions(request: web.Request, where: Scope, deployment: Obj) -> list[Obj]:
    """The Deployment's ReplicaSets, read from the cluster (a rollback needs the current
    list, and few requests ask for it)."""
    client = await request.app[DEPS].connections.client(where.cluster)
    meta = deployment["metadata"]
    selector = (deployment["spec"].get("selector") or {}).get("matchLabels") or {}
    found = [
        as_dict(rs)
        async for rs in client.list(ReplicaSet, namespace=meta["namespace"], labels=selector)
    ]
    return [
        rs
        for rs in found
        if any(o.get("uid") == meta.get("uid") for o in rs["metadata"].get("ownerReferences") or [])
    ]


async def _revision(request: web.Request, where: Scope, deployment: Obj, value: Any) -> Obj:
    """The ReplicaSet `replicaset:<namespace>:<name>` of this Deployment; 422 otherwise."""
    prefix, _, rest = value.partition(":") if isinstance(value, str) else ("", "", "")
    if prefix != "replicaset" or ScopedId.parse_or_none(rest) is None:
        raise errors.invalid("replicaSetId", "replicaSetId must be replicaset:<namespace>:<name>")
    wanted = ScopedId.parse(rest)
    for rs in await _revisions(request, where, deployment):
        if ScopedId.of(rs) == wanted:
            return rs
    raise errors.invalid(
        "replicaSetId", f"{value} is not a revision of this workload", "InvalidReference"
    )
