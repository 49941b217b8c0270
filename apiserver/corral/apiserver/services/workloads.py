"""The rules every workload and pod route shares: which namespaces a project's workloads
live in, finding one, the quota check, and the writes themselves.

Reads come from the API server's caches of the downstream cluster (`state.downstream`); a
write goes to the cluster as the caller (`Scope.who`: the cluster's RBAC, quotas and admission
judge them) and is put into the cache at once. An update replaces the object on
condition that it is still the version the change was computed from (its resourceVersion); a
change made meanwhile by anyone else is never overwritten: the update is computed again on
the new version.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.types import CascadeType

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, access, caller, deps
from corral.apiserver.services import trialpods
from corral.apiserver.services.visibility import visible_project
from corral.apiserver.state import downstream
from corral.core import errors, settings
from corral.core.api.ids import ScopedId
from corral.core.errors import Invalid
from corral.core.kube import guarded
from corral.core.kube import workloads as resources
from corral.core.kube.client import as_dict
from corral.core.kube.impersonation import Impersonation
from corral.core.kube.informer import Informer, Obj
from corral.core.projects import quota, roles
from corral.core.projects.downstream import QUOTA_NAME
from corral.core.workloads import endpoints, spec, usage
from corral.core.workloads.kinds import KINDS, REDEPLOYED_AT, Kind, WorkloadId

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scope:
    """A project the caller has a role in, that role, and who the caller is downstream."""

    project_id: str
    cluster: str
    role: str | None
    who: Impersonation

    @property
    def writable(self) -> bool:
        return roles.may_write_workloads(self.role)

    def require_write(self, what: str) -> None:
        if not self.writable:
            raise errors.forbidden(
                f"only owners and members of project {self.project_id} may {what}"
            )


def scope(request: web.Request) -> Scope:
    """The project of the path; 404 when the caller has no role in it."""
    pid = request.match_info["project"]
    visible_project(deps(request), caller(request), pid)
    role = access(request).project_role(pid)
    return Scope(pid, ScopedId.parse(pid).namespace, role, principal(request).downstream())


async def acting(request: web.Request, where: Scope) -> AsyncClient:
    """A client of the project's cluster that acts as the caller."""
    return await request.app[DEPS].connections.client_as(where.cluster, where.who)


async def namespaces(request: web.Request, where: Scope) -> set[str]:
    """The names of the project's namespaces."""
    cache = await downstream.downstream_namespaces(request.app[DEPS].connections, where.cluster)
    return {ns["metadata"]["name"] for ns in cache.by_index("project", where.project_id)}


async def cache_of(request: web.Request, where: Scope, kind: Kind) -> Informer:
    return await downstream.downstream_workloads(request.app[DEPS].connections, where.cluster, kind)


async def listed(request: web.Request, where: Scope) -> list[tuple[Kind, Obj]]:
    """Every workload of the project, of every kind."""
    members = await namespaces(request, where)
    found: list[tuple[Kind, Obj]] = []
    for kind in KINDS.values():
        cache = await cache_of(request, where, kind)
        for namespace in members:
            found.extend((kind, obj) for obj in cache.by_index("namespace", namespace))
    return found


async def find(request: web.Request, where: Scope, text: str) -> tuple[Kind, Obj]:
    """The workload `text` names in the project; 404 for a bad id or one outside it."""
    try:
        wid = WorkloadId.parse(text)
    except Invalid:
        raise errors.not_found(f"workload {text} not found") from None
    obj = None
    if wid.namespace in await namespaces(request, where):
        obj = (await cache_of(request, where, wid.kind)).get(wid.key)
    if obj is None:
        raise errors.not_found(f"workload {text} not found in project {where.project_id}")
    return wid.kind, obj


async def target_namespace(request: web.Request, where: Scope, value: Any) -> str:
    """The `namespaceId` of a create: a namespace of this project."""
    if not isinstance(value, str) or not value:
        raise errors.missing("namespaceId")
    if value not in await namespaces(request, where):
        raise errors.invalid(
            "namespaceId",
            f"namespace {value} is not in project {where.project_id}",
            "InvalidReference",
        )
    return value


# -- writes ---------------------------------------------------------------------------------


async def create(request: web.Request, where: Scope, kind: Kind, obj: Obj) -> Obj:
    client = await acting(request, where)
    resource = resources.RESOURCES[kind.type]
    created = as_dict(await client.create(resource.from_dict(obj)))
    (await cache_of(request, where, kind)).put(created)
    return created


async def update(
    request: web.Request, where: Scope, kind: Kind, obj: Obj, change: Callable[[Obj], Obj]
) -> Obj:
    """Writes `change(obj)` on condition that the stored object is still `obj`'s version; when
    it moved on (a controller writes status all the time), reads it again and computes the
    change again. 409 when it kept moving."""
    client = await acting(request, where)
    resource = resources.RESOURCES[kind.type]
    meta = obj["metadata"]
    # Until a deadline, not a count: the controllers' status writes come in bursts while a
    # workload rolls, and each one refuses the write at the version before it.
    ends = time.monotonic() + guarded.DEADLINE
    while True:
        try:
            written = as_dict(await client.replace(resource.from_dict(change(obj))))
        except KubeApiError as exc:
            if exc.status.code != 409:
                raise
            if time.monotonic() > ends:
                raise errors.Conflict(
                    f"workload {WorkloadId.of(kind, obj)} kept changing; try again", code="Conflict"
                ) from None
            obj = as_dict(await client.get(resource, meta["name"], namespace=meta["namespace"]))
            continue
        (await cache_of(request, where, kind)).put(written)
        return written


async def delete(request: web.Request, where: Scope, kind: Kind, obj: Obj) -> None:
    """Deletes the workload and, in the background, what it made (a Job's pods too: the API's
    default for Jobs would leave them behind)."""
    client = await acting(request, where)
    meta = obj["metadata"]
    try:
        await client.delete(
            resources.RESOURCES[kind.type],
            meta["name"],
            namespace=meta["namespace"],
            cascade=CascadeType.BACKGROUND,
        )
    except KubeApiError as exc:
        if exc.status.code != 404:
            raise
    (await cache_of(request, where, kind)).forget(f"{meta['namespace']}/{meta['name']}")


def redeployed(kind: Kind, obj: Obj) -> Obj:
    """A copy whose pod template is new only by a time stamp: a new rollout of the same."""
    template = kind.pod_template(obj)
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[REDEPLOYED_AT] = datetime.datetime.now(datetime.UTC).isoformat()
    return obj


# -- what surrounds a workload ---------------------------------------------------------------


@dataclass(frozen=True)
class Neighbours:
    """The cluster's Services, Ingresses and pods, which a workload's public endpoints come
    from: looked up once per request, however many workloads it shows."""

    services: Informer
    ingresses: Informer
    pods: Informer


async def neighbours(request: web.Request, where: Scope) -> Neighbours:
    connections = request.app[DEPS].connections
    return Neighbours(
        await downstream.downstream_services(connections, where.cluster),
        await downstream.downstream_ingresses(connections, where.cluster),
        await downstream.downstream_pods(connections, where.cluster),
    )


def public_endpoints(kind: Kind, obj: Obj, near: Neighbours) -> list[dict[str, Any]]:
    namespace = obj["metadata"]["namespace"]
    labels = (kind.pod_template(obj).get("metadata") or {}).get("labels") or {}
    services = near.services.by_index("namespace", namespace)
    if not any(endpoints.selects(s, labels) for s in services):
        return []  # most workloads: no need to look at pods
    hosts: set[str] = set()
    for pod in near.pods.by_index("namespace", namespace):
        pod_labels = pod["metadata"].get("labels") or {}
        host = (pod.get("status") or {}).get("hostIP")
        if host and all(pod_labels.get(k) == v for k, v in labels.items()):
            hosts.add(host)
    ingresses = near.ingresses.by_index("namespace", namespace)
    return endpoints.public_endpoints(labels, services, ingresses, sorted(hosts))


# -- bounds -----------------------------------------------------------------------------------


def check_bounds(request: web.Request, kind: Kind, obj: Obj) -> None:
    """422 for more pods than the setting `workload-max-scale` allows, or pods too large."""
    max_scale = int(request.app[DEPS].stores.number(settings.WORKLOAD_MAX_SCALE_SETTING))
    spec.check_bounds(kind, obj, max_scale)


# -- admission --------------------------------------------------------------------------------


async def admit(
    request: web.Request, where: Scope, kind: Kind, obj: Obj, current: Obj | None
) -> None:
    """422 when the namespace would refuse the workload's pods: its Pod Security level
    (`services.trialpods`), or its quota (QuotaExceeded).

    One pod of the workload is created as a dry run, so the namespace's own admission judges
    it and fills in the container defaults (and refuses a pod that alone does not fit); that
    pod, times the pods the workload asks for, less what its pods take now, must fit in what
    the quota has left."""
    connections = request.app[DEPS].connections
    admitted = await trialpods.admitted(await acting(request, where), kind, obj, where.project_id)
    namespace = obj["metadata"]["namespace"]
    quotas = await downstream.downstream_quotas(connections, where.cluster)
    found = quotas.get(f"{namespace}/{QUOTA_NAME}")
    if found is None:
        return
    nodes = len(request.app[DEPS].stores.nodes.by_index("cluster", where.cluster))
    count = usage.pods_wanted(kind, obj, nodes)
    releasing: dict[str, Decimal] = {}
    if current is not None:
        for pod in await pods_of(request, where, kind, current):
            for field, value in usage.per_pod(pod).items():
                releasing[field] = releasing.get(field, Decimal(0)) + value
    totals = quota.usage([found])
    excess = usage.excesses(
        usage.per_pod(admitted), count, releasing, totals["hard"], totals["used"]
    )
    if excess:
        raise quota.QuotaExceeded(where.project_id, excess)


# -- pods -------------------------------------------------------------------------------------


async def pods_of(request: web.Request, where: Scope, kind: Kind, obj: Obj) -> list[Obj]:
    """The pods the workload runs now."""
    wid = str(WorkloadId.of(kind, obj))
    pods = await downstream.downstream_pods(request.app[DEPS].connections, where.cluster)
    candidates = pods.by_index("namespace", obj["metadata"]["namespace"])
    jobs = await cache_of(request, where, KINDS["job"])
    return [p for p in candidates if workload_of(p, jobs) == wid]


def workload_of(pod: Obj, jobs: Informer) -> str | None:
    """The id of the workload that runs `pod`, by the pod's owner: a ReplicaSet of a
    Deployment (named `<deployment>-<pod-template-hash>`), a StatefulSet, DaemonSet or Job, or a
    Job of a CronJob."""
    meta = pod["metadata"]
    namespace = meta["namespace"]
    for owner in meta.get("ownerReferences") or []:
        if not owner.get("controller"):
            continue
        kind, name = owner.get("kind"), owner.get("name", "")
        if kind == "ReplicaSet":
            template_hash = (meta.get("labels") or {}).get("pod-template-hash")
            if not template_hash or not name.endswith(f"-{template_hash}"):
                return None  # a ReplicaSet of its own, not a Deployment's
            return f"deployment:{namespace}:{name.removesuffix(f'-{template_hash}')}"
        if kind in ("StatefulSet", "DaemonSet"):
            return f"{kind[0].lower()}{kind[1:]}:{namespace}:{name}"
        if kind == "Job":
            job = jobs.get(f"{namespace}/{name}")
            for job_owner in (job or {}).get("metadata", {}).get("ownerReferences") or []:
                if job_owner.get("controller") and job_owner.get("kind") == "CronJob":
                    return f"cronJob:{namespace}:{job_owner['name']}"
            return f"job:{namespace}:{name}"
    return None


async def find_pod(request: web.Request, where: Scope, text: str) -> Obj:
    """The pod `<namespace>:<name>` in the project; 404 for a bad id or one outside it."""
    pid = ScopedId.parse_or_none(text)
    obj = None
    if pid is not None and pid.namespace in await namespaces(request, where):
        pods = await downstream.downstream_pods(request.app[DEPS].connections, where.cluster)
        obj = pods.get(pid.key)
    if obj is None:
        raise errors.not_found(f"pod {text} not found in project {where.project_id}")
    return obj
