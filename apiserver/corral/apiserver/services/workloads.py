"""A project's workloads: which namespaces they live in, finding one, the quota check, the
writes themselves and their revisions; and the scope a project's pods are read in too
(`services.pods`).

Reads come from the API server's caches of the downstream cluster (`state.downstream`); a
write goes to the cluster as the caller (`Scope.who`: the cluster's RBAC, quotas and admission
judge them) and is put into the cache at once. An update replaces the object on
condition that it is still the version the change was computed from (its resourceVersion); a
change made meanwhile by anyone else is never overwritten: the update is computed again on
the new version.
"""

from __future__ import annotations

import datetime
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.core_v1 import Affinity, PodSecurityContext, SecurityContext, Volume
from lightkube.resources.apps_v1 import ReplicaSet
from lightkube.types import CascadeType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import text as body_text
from corral.apiserver.http.envelope import Listing
from corral.apiserver.http.rows import Fuller, Row, Rows, fuller
from corral.apiserver.services import trialpods
from corral.apiserver.services.visibility import seen_project, visible_project
from corral.apiserver.state import downstream
from corral.core import errors, settings
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.errors import Invalid
from corral.core.kube import guarded
from corral.core.kube import workloads as resources
from corral.core.kube.client import as_dict
from corral.core.kube.impersonation import Impersonation
from corral.core.kube.informer import Informer, Obj, key_of
from corral.core.projects import quota, roles
from corral.core.projects.downstream import QUOTA_NAME
from corral.core.workloads import endpoints, render, spec, state, usage
from corral.core.workloads.kinds import (
    DEPLOYMENT,
    KINDS,
    REDEPLOYED_AT,
    Kind,
    WorkloadId,
    check_name,
    kind_named,
)

log = logging.getLogger(__name__)

ACTIONS = ("pause", "resume", "redeploy", "rollback")


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


def scope(deps: Deps, who: Caller, pid: str) -> Scope:
    """The project `pid`; 404 when the caller has no role in it."""
    visible_project(deps, who, pid)
    role = who.access.project_role(pid)
    return Scope(pid, ScopedId.parse(pid).namespace, role, who.downstream())


@dataclass(frozen=True)
class Workload:
    """A workload as `/v3` shows it: its kind and object, in the caller's scope, with what
    surrounds it (its public endpoints come from there)."""

    where: Scope
    kind: Kind
    obj: Obj
    near: Neighbours

    @functools.cached_property
    def id(self) -> str:
        return str(WorkloadId.of(self.kind, self.obj))

    @property
    def actions(self) -> tuple[str, ...]:
        """The actions that apply to its kind."""
        if self.kind.type == DEPLOYMENT:
            return ACTIONS
        return ("redeploy",) if self.kind.rolls_out else ()


# What a listing of a project's workloads filters and sorts by without making any `Workload`:
# what their ids give, and, from rows made again when one of the project's changed, `state`.
KNOWN = render.ID_FIELDS | {"projectId"}
STATED = KNOWN | {"state"}


async def visible(deps: Deps, who: Caller, pid: str) -> Listing[Workload, tuple[Kind, str]]:
    """Every workload of the project, of every kind, in id order, each made a `Workload`
    only when a page shows it; 404 without a role in it."""
    where = scope(deps, who, pid)
    near = await neighbours(deps, where)
    caches = {kind: await cache_of(deps, where, kind) for kind in KINDS.values()}
    spaces = await downstream.downstream_namespaces(deps.connections, where.cluster)
    rows = await _rows(deps, where, caches)

    def obj_of(held: tuple[Kind, str]) -> Obj:
        # Rows hold keys, not objects: they outlive changes to them (a status written).
        kind, key = held
        obj = caches[kind].get(key)
        assert obj is not None  # the rows are of the workloads the caches hold now
        return obj

    def make(held: tuple[Kind, str]) -> Workload:
        return Workload(where, held[0], obj_of(held), near)

    def stated() -> Rows[tuple[Kind, str]]:
        return _stated(deps, where, spaces, caches, rows, obj_of)

    return Listing(rows, KNOWN, make, stated, STATED)


async def find(deps: Deps, who: Caller, pid: str, text: str) -> Workload | None:
    """The workload `text` names in the project, if it has one; 404 for a bad id."""
    where = scope(deps, who, pid)
    try:
        wid = WorkloadId.parse(text)
    except Invalid:
        raise errors.not_found(f"workload {text} not found") from None
    if wid.namespace not in await namespaces(deps, where):
        return None
    obj = (await cache_of(deps, where, wid.kind)).get(wid.key)
    if obj is None:
        return None
    return Workload(where, wid.kind, obj, await neighbours(deps, where))


async def seen_in(deps: Deps, who: Caller, cluster: str, obj: Obj) -> Scope | None:
    """The project whose namespace holds `obj` (a workload or pod of `cluster`) as a scope of
    the caller, if they have a role in it: whom a change of it goes to (`GET /v3/subscribe`),
    as `find` would show it."""
    spaces = await downstream.downstream_namespaces(deps.connections, cluster)
    namespace = spaces.get(obj["metadata"].get("namespace", ""))
    annotations = (namespace or {}).get("metadata", {}).get("annotations") or {}
    pid = ScopedId.parse_or_none(annotations.get(names.ANNOTATION_PROJECT, ""))
    # A namespace may name a project of another cluster: none of its objects are in it.
    if pid is None or pid.namespace != cluster or seen_project(deps, who, str(pid)) is None:
        return None
    return scope(deps, who, str(pid))


async def changed(deps: Deps, who: Caller, cluster: str, kind: Kind, obj: Obj) -> Workload | None:
    """A workload of `cluster` a change was seen of, if the caller has a role in its project."""
    where = await seen_in(deps, who, cluster, obj)
    if where is None:
        return None
    return Workload(where, kind, obj, await neighbours(deps, where))


def may_create(deps: Deps, who: Caller, pid: str) -> None:
    scope(deps, who, pid).require_write("create workloads")


async def create(deps: Deps, who: Caller, pid: str, body: dict[str, Any]) -> Workload:
    """The workload a body describes, judged first as its pods will be (`admit`)."""
    where = scope(deps, who, pid)
    if body.get("type", "workload") != "workload":
        raise errors.invalid("type", "type must be workload")
    kind = kind_named(body_text(body, "workloadType", max_length=64) or DEPLOYMENT)
    name = check_name(body.get("name"), kind)
    namespace = await target_namespace(deps, where, body.get("namespaceId"))
    if (await cache_of(deps, where, kind)).get(f"{namespace}/{name}"):
        raise errors.conflict(f"workload {kind.type}:{namespace}:{name} already exists")
    obj = spec.build(kind, namespace, name, body)
    check_passed_through(body)
    check_bounds(deps, kind, obj)
    await admit(deps, where, kind, obj, None)
    created = await _create(deps, where, kind, obj)
    return Workload(where, kind, created, await neighbours(deps, where))


async def update(deps: Deps, found: Workload, body: dict[str, Any]) -> Workload:
    """The workload with what the body gives merged in; its name, kind and namespace stay."""
    where, kind, obj = found.where, found.kind, found.obj
    for field, now in (
        ("name", obj["metadata"]["name"]),
        ("workloadType", kind.type),
        ("namespaceId", obj["metadata"]["namespace"]),
    ):
        if body.get(field) not in (None, now):
            raise errors.invalid(field, f"{field} cannot be changed (it is {now})")
    changed = spec.merge(kind, obj, body)
    check_passed_through(body)
    check_bounds(deps, kind, changed)
    if kind.pod_template(changed) != kind.pod_template(obj) or body.get("scale") is not None:
        await admit(deps, where, kind, changed, obj)
    replaced = await _replace(
        deps, where, kind, obj, lambda current: spec.merge(kind, current, body)
    )
    return Workload(where, kind, replaced, await neighbours(deps, where))


def check_passed_through(body: dict[str, Any]) -> None:
    """The objects a body passes through as Kubernetes takes them (security contexts, the
    affinity, volume sources), read as Kubernetes' schema reads them: a key it does not have
    (a misspelt `runAsNonRoot`) would be dropped on its way to the cluster, so it is refused
    naming it, and a value of the wrong type is refused before it is sent."""
    given: list[tuple[str, Any, Any]] = [("securityContext", PodSecurityContext,
                                          body.get("securityContext"))]  # fmt: skip
    scheduling = body.get("scheduling")
    if isinstance(scheduling, dict):
        given.append(("scheduling.affinity", Affinity, scheduling.get("affinity")))
    for i, container in enumerate(body.get("containers") or []):
        if isinstance(container, dict):
            where = f"containers[{i}].securityContext"
            given.append((where, SecurityContext, container.get("securityContext")))
    given += [(f"volumes[{i}]", Volume, v) for i, v in enumerate(body.get("volumes") or [])]
    for where, model, value in given:
        if not isinstance(value, dict):
            continue  # absent, or refused already by the spec's own checks
        try:
            kept = model.from_dict(value).to_dict()
        except (ValueError, TypeError) as exc:
            raise errors.invalid(where, f"{where}: {exc}") from None
        if (lost := dropped(value, kept)) is not None:
            raise errors.unknown(f"{where}{lost}", "what Kubernetes takes there")


def dropped(sent: Any, kept: Any) -> str | None:
    """The path (`.a.b`, `[0].c`) of the first key of `sent` that `kept` lacks, if any."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key, value in sent.items():
            if value is None:
                continue
            if key not in kept:
                return f".{key}"
            if (inner := dropped(value, kept[key])) is not None:
                return f".{key}{inner}"
    if isinstance(sent, list) and isinstance(kept, list):
        for i, (item, kept_item) in enumerate(zip(sent, kept, strict=False)):
            if (inner := dropped(item, kept_item)) is not None:
                return f"[{i}]{inner}"
    return None


async def delete(deps: Deps, found: Workload) -> None:
    found.where.require_write("delete workloads")
    await _delete(deps, found.where, found.kind, found.obj)


def may_act(found: Workload, action: str) -> None:
    """403 for a caller who may not change the workload, 422 for an action of another kind."""
    found.where.require_write(f"{action} workloads")
    if action not in found.actions:
        raise errors.Invalid(
            f"{action} does not apply to a {found.kind.type}", code="InvalidAction"
        )


async def act(deps: Deps, found: Workload, action: str, body: dict[str, Any]) -> Workload:
    """Pauses, resumes, redeploys or rolls back (to the body's `replicaSetId`) a workload."""
    where, kind, obj = found.where, found.kind, found.obj
    template: Obj | None = None
    if action == "rollback":
        revision = await _revision(deps, where, obj, body.get("replicaSetId"))
        template = revision["spec"]["template"]
        template["metadata"].get("labels", {}).pop("pod-template-hash", None)

    def change(current: Obj) -> Obj:
        changed = spec.merge(kind, current, {})
        if action in ("pause", "resume"):
            changed["spec"]["paused"] = action == "pause"
        elif action == "redeploy":
            changed = _redeployed(kind, changed)
        else:
            changed["spec"]["template"] = template
        return changed

    if action in ("redeploy", "rollback"):  # new pods, judged as they will be
        await admit(deps, where, kind, change(obj), obj)
    replaced = await _replace(deps, where, kind, obj, change)
    return Workload(where, kind, replaced, await neighbours(deps, where))


async def revisions(deps: Deps, found: Workload) -> list[Obj]:
    """A Deployment's ReplicaSets; 422 for a workload of another kind."""
    if found.kind.type != DEPLOYMENT:
        raise errors.Invalid(f"a {found.kind.type} keeps no revisions", code="InvalidAction")
    return await _revisions(deps, found.where, found.obj)


async def _revisions(deps: Deps, where: Scope, deployment: Obj) -> list[Obj]:
    """The Deployment's ReplicaSets, read from the cluster (a rollback needs the current
    list, and few requests ask for it)."""
    client = await deps.connections.client(where.cluster)
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


async def _revision(deps: Deps, where: Scope, deployment: Obj, value: Any) -> Obj:
    """The ReplicaSet `replicaset:<namespace>:<name>` of this Deployment; 422 otherwise."""
    prefix, _, rest = value.partition(":") if isinstance(value, str) else ("", "", "")
    if prefix != "replicaset" or ScopedId.parse_or_none(rest) is None:
        raise errors.invalid("replicaSetId", "replicaSetId must be replicaset:<namespace>:<name>")
    wanted = ScopedId.parse(rest)
    for rs in await _revisions(deps, where, deployment):
        if ScopedId.of(rs) == wanted:
            return rs
    raise errors.invalid(
        "replicaSetId", f"{value} is not a revision of this workload", "InvalidReference"
    )


async def acting(deps: Deps, where: Scope) -> AsyncClient:
    """A client of the project's cluster that acts as the caller."""
    return await deps.connections.client_as(where.cluster, where.who)


async def namespaces(deps: Deps, where: Scope) -> set[str]:
    """The names of the project's namespaces."""
    cache = await downstream.downstream_namespaces(deps.connections, where.cluster)
    return {ns["metadata"]["name"] for ns in cache.by_index("project", where.project_id)}


async def pods_cache(deps: Deps, where: Scope) -> Informer:
    return await downstream.downstream_pods(deps.connections, where.cluster, deps.stores.changes)


async def cache_of(deps: Deps, where: Scope, kind: Kind) -> Informer:
    return await downstream.downstream_workloads(
        deps.connections, where.cluster, kind, deps.stores.changes
    )


async def _rows(deps: Deps, where: Scope, caches: dict[Kind, Informer]) -> Rows[tuple[Kind, str]]:
    """The project's workloads of every kind in id order, with the fields their ids give:
    sorted again, and their views made again, only after a namespace of the cluster changed
    (its project may have) or a workload came or went, not when one changed (its id and
    those fields cannot)."""
    spaces = await downstream.downstream_namespaces(deps.connections, where.cluster)

    def derive() -> Rows[tuple[Kind, str]]:
        members = {ns["metadata"]["name"] for ns in spaces.by_index("project", where.project_id)}
        rows: list[Row[tuple[Kind, str]]] = []
        for kind, cache in caches.items():
            for namespace in members:
                for obj in cache.by_index("namespace", namespace):
                    shown = render.id_fields(WorkloadId.of(kind, obj))
                    shown["projectId"] = where.project_id
                    rows.append((shown["id"], shown, (kind, key_of(obj))))
        return Rows(rows)

    stamp = (spaces, spaces.version, *((c, c.members) for c in caches.values()))
    return deps.workload_rows.get(where.project_id, stamp, derive)


def _stated(
    deps: Deps,
    where: Scope,
    spaces: Informer,
    caches: dict[Kind, Informer],
    rows: Rows[tuple[Kind, str]],
    obj_of: Callable[[tuple[Kind, str]], Obj],
) -> Rows[tuple[Kind, str]]:
    """The project's rows knowing each workload's `state` too: made again only after a
    workload of one of the project's own namespaces came, changed or went (or the rows were
    made again), so a filter or sort by state reads views of them as one by name does."""
    pid = where.project_id
    members = sorted(ns["metadata"]["name"] for ns in spaces.by_index("project", pid))
    moved = tuple((c, tuple(c.touched("namespace", ns) for ns in members)) for c in caches.values())
    kept = deps.workload_states

    def derive() -> Fuller[tuple[Kind, str]]:
        return fuller(rows, obj_of, lambda held, obj: {"state": state.state(held[0], obj)},
                      kept.last(pid))  # fmt: skip

    return kept.get(pid, (rows, *moved), derive).rows


async def target_namespace(deps: Deps, where: Scope, value: Any) -> str:
    """The `namespaceId` of a create: a namespace of this project."""
    if not isinstance(value, str) or not value:
        raise errors.missing("namespaceId")
    if value not in await namespaces(deps, where):
        raise errors.invalid(
            "namespaceId",
            f"namespace {value} is not in project {where.project_id}",
            "InvalidReference",
        )
    return value


# -- writes ---------------------------------------------------------------------------------


async def _create(deps: Deps, where: Scope, kind: Kind, obj: Obj) -> Obj:
    client = await acting(deps, where)
    resource = resources.RESOURCES[kind.type]
    created = as_dict(await client.create(resource.from_dict(obj)))
    (await cache_of(deps, where, kind)).put(created)
    return created


async def _replace(
    deps: Deps, where: Scope, kind: Kind, obj: Obj, change: Callable[[Obj], Obj]
) -> Obj:
    """Writes `change(obj)` on condition that the stored object is still `obj`'s version; when
    it moved on (a controller writes status all the time), reads it again and computes the
    change again. 409 when it kept moving."""
    client = await acting(deps, where)
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
        (await cache_of(deps, where, kind)).put(written)
        return written


async def _delete(deps: Deps, where: Scope, kind: Kind, obj: Obj) -> None:
    """Deletes the workload and, in the background, what it made (a Job's pods too: the API's
    default for Jobs would leave them behind)."""
    client = await acting(deps, where)
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
    (await cache_of(deps, where, kind)).forget(f"{meta['namespace']}/{meta['name']}")


def _redeployed(kind: Kind, obj: Obj) -> Obj:
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


async def neighbours(deps: Deps, where: Scope) -> Neighbours:
    connections = deps.connections
    return Neighbours(
        await downstream.downstream_services(connections, where.cluster),
        await downstream.downstream_ingresses(connections, where.cluster),
        await pods_cache(deps, where),
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


def check_bounds(deps: Deps, kind: Kind, obj: Obj) -> None:
    """422 for more pods than the setting `workload-max-scale` allows, or pods too large."""
    max_scale = int(deps.stores.number(settings.WORKLOAD_MAX_SCALE_SETTING))
    spec.check_bounds(kind, obj, max_scale)


# -- admission --------------------------------------------------------------------------------


async def admit(deps: Deps, where: Scope, kind: Kind, obj: Obj, current: Obj | None) -> None:
    """422 when the namespace would refuse the workload's pods: its Pod Security level
    (`services.trialpods`), or its quota (QuotaExceeded).

    One pod of the workload is created as a dry run, so the namespace's own admission judges
    it and fills in the container defaults (and refuses a pod that alone does not fit); that
    pod, times the pods the workload asks for, less what its pods take now, must fit in what
    the quota has left."""
    connections = deps.connections
    admitted = await trialpods.admitted(await acting(deps, where), kind, obj, where.project_id)
    namespace = obj["metadata"]["namespace"]
    quotas = await downstream.downstream_quotas(connections, where.cluster)
    found = quotas.get(f"{namespace}/{QUOTA_NAME}")
    if found is None:
        return
    nodes = len(deps.stores.nodes.by_index("cluster", where.cluster))
    count = usage.pods_wanted(kind, obj, nodes)
    releasing: dict[str, Decimal] = {}
    if current is not None:
        for pod in await pods_of(deps, where, kind, current):
            for field, value in usage.per_pod(pod).items():
                releasing[field] = releasing.get(field, Decimal(0)) + value
    totals = quota.usage([found])
    excess = usage.excesses(
        usage.per_pod(admitted), count, releasing, totals["hard"], totals["used"]
    )
    if excess:
        raise quota.QuotaExceeded(where.project_id, excess)


# -- pods -------------------------------------------------------------------------------------


async def pods_of(deps: Deps, where: Scope, kind: Kind, obj: Obj) -> list[Obj]:
    """The pods the workload runs now."""
    wid = str(WorkloadId.of(kind, obj))
    pods = await pods_cache(deps, where)
    candidates = pods.by_index("namespace", obj["metadata"]["namespace"])
    jobs = await cache_of(deps, where, KINDS["job"])
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
