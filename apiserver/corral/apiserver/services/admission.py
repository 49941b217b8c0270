"""Changes to a project that must not race: its quota, and namespaces entering it; and what
its namespaces use, against which both are checked.

Two requests that each fit alone may not fit together (two namespaces taking the last room of
a project, or a namespace arriving while the project's limit is lowered), and they may be
served by different API server replicas. So every such change writes the Project on condition
that it is still the version the change was checked against (its resourceVersion); of two
racing requests, one writes and the other reads the Project again and checks again:

- a quota change is the write itself;
- a namespace entering a project first writes a reservation on the Project (an annotation per
  namespace, `quota.RESERVATION_PREFIX`), which counts as a member until the namespace is in
  place and the reservation removed, or until it expires if its request died.

Members are counted from a fresh list of the cluster's namespaces, not from this replica's
watch, which may not have seen another replica's namespace yet.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from corral.apiserver.deps import Deps
from corral.apiserver.state.downstream import downstream_namespaces, downstream_quotas
from corral.core import errors, jsonpatch
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.errors import NotFound
from corral.core.kube import guarded, kinds
from corral.core.kube.client import as_dict
from corral.core.kube.guarded import GENERATION
from corral.core.kube.informer import Obj
from corral.core.projects import downstream, quota

# What a change is checked against: the spec (by its generation: the quota) and the
# annotations (the reservations). The status, which the operator writes, is not one of them.
READS = (GENERATION, ("metadata", "annotations"))

Change = Callable[[Obj], Awaitable[list[dict[str, Any]]]]


def project_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def limit_of(spec: dict[str, Any]) -> dict[str, str]:
    return dict((spec.get("resourceQuota") or {}).get("limit") or {})


def default_of(spec: dict[str, Any]) -> dict[str, str]:
    return dict((spec.get("namespaceDefaultResourceQuota") or {}).get("limit") or {})


async def update(deps: Deps, obj: Obj, change: Change) -> Obj:
    """Applies `change(project)` (JSON patch operations, computed and checked against that
    version of the project) if what it was computed from is still so (`READS`); else reads it
    again and computes the change again. 409 Conflict when it kept changing."""
    meta = obj["metadata"]
    try:
        patched = await guarded.patch(
            deps.kube, kinds.Project, meta["name"], change, READS,
            namespace=meta["namespace"], current=obj,
        )  # fmt: skip
    except NotFound:
        raise errors.not_found(f"project {project_id(obj)} not found") from None
    deps.stores.projects.put(patched)
    return patched


async def current(deps: Deps, obj: Obj) -> Obj:
    """The Project as stored now, not as this replica's watch last saw it."""
    meta = obj["metadata"]
    kube = deps.kube
    try:
        fresh = as_dict(await kube.get(kinds.Project, meta["name"], namespace=meta["namespace"]))
    except KubeApiError as exc:
        if exc.status.code == 404:
            raise errors.not_found(f"project {project_id(obj)} not found") from None
        raise
    deps.stores.projects.put(fresh)
    return fresh


async def members(deps: Deps, obj: Obj) -> set[str]:
    """The project's namespaces now: a fresh list of those labelled with it, those this
    replica's watch knows by annotation (set by hand, the label not yet fixed), and those
    reserved."""
    cluster, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    connections = deps.connections
    watched = (await downstream_namespaces(connections, cluster)).by_index(
        "project", project_id(obj)
    )
    client = await connections.client(cluster)
    try:
        listed = [
            as_dict(n)["metadata"]["name"]
            async for n in client.list(Namespace, labels={names.LABEL_PROJECT: name})
        ]
    except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is a 503
        raise errors.Unavailable(
            f"cannot list the namespaces of cluster {cluster}: {exc}"
        ) from None
    reserved, _ = quota.reservations(_annotations(obj), _now())
    return {n["metadata"]["name"] for n in watched} | set(listed) | reserved


async def reserve(deps: Deps, obj: Obj, namespace: str) -> None:
    """Room for `namespace` in the project, recorded on the Project, or 422 QuotaExceeded."""

    async def change(project: Obj) -> list[dict[str, Any]]:
        if project["metadata"].get("deletionTimestamp"):
            raise errors.invalid(
                "projectId", f"project {project_id(project)} is being deleted", "InvalidState"
            )
        spec = project.get("spec") or {}
        limit, default = limit_of(spec), default_of(spec)
        if limit:
            count = len(await members(deps, project) | {namespace})
            excess = quota.overcommit(limit, default, count)
            if excess:
                raise quota.QuotaExceeded(project_id(project), excess)
        return _reservation_operations(project, namespace)

    await update(deps, obj, change)


@contextlib.asynccontextmanager
async def admitted(deps: Deps, project: str | None, namespace: str) -> AsyncIterator[None]:
    """Holds a reservation for `namespace` in `project` (an id, None for no project) while
    the namespace is created or moved in."""
    if not project:
        yield
        return
    pid = ScopedId.parse_or_none(project)
    obj = deps.stores.projects.get(pid.key) if pid else None
    if obj is None:
        raise errors.invalid("projectId", f"project {project} not found", "InvalidReference")
    await reserve(deps, obj, namespace)
    try:
        yield
    finally:
        await release(deps, obj, namespace)


async def release(deps: Deps, obj: Obj, namespace: str) -> None:
    """Removes the reservation, whatever version the Project is at now (if this fails, the
    reservation expires)."""
    meta = obj["metadata"]
    try:
        patched = await deps.kube.patch(
            kinds.Project, meta["name"],
            {"metadata": {"annotations": {quota.reservation_key(namespace): None}}},
            namespace=meta["namespace"], patch_type=PatchType.MERGE,
        )  # fmt: skip
    except KubeApiError:
        return
    deps.stores.projects.put(as_dict(patched))


async def check_quota_change(deps: Deps, obj: Obj, spec: dict[str, Any]) -> None:
    """A new quota must hold what the project's namespaces have and already use."""
    pid = project_id(obj)
    limit, default = limit_of(spec), default_of(spec)
    if not limit:
        return
    excess = quota.overcommit(limit, default, len(await members(deps, obj)))
    if excess:
        raise quota.QuotaExceeded(pid, excess)
    quotas = await project_quotas(deps, obj)
    excess = quota.below_use(limit, quota.usage(quotas)["used"], "the project")
    for each in quotas:
        name = each["metadata"]["namespace"]
        used = quota.usage([each])["used"]
        excess += quota.below_use(default, used, f"namespace {name}")
    if excess:
        raise quota.QuotaExceeded(pid, excess)


async def project_quotas(deps: Deps, obj: Obj) -> list[Obj]:
    """The ResourceQuotas corral keeps in the project's namespaces, with their status."""
    cluster, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    quotas = (await downstream_quotas(deps.connections, cluster)).by_index("project", name)
    return [q for q in quotas if q["metadata"]["name"] == downstream.QUOTA_NAME]


async def usage(deps: Deps, obj: Obj) -> dict[str, Any]:
    """The project's namespaces, its limit, and what its namespaces use and may use."""
    totals = quota.usage(await project_quotas(deps, obj))
    namespaces = (
        await downstream_namespaces(deps.connections, obj["metadata"]["namespace"])
    ).by_index("project", project_id(obj))
    return {
        "namespaces": len(namespaces),
        "limit": limit_of(obj.get("spec") or {}),
        "used": quota.printable(totals["used"]),
        "hard": quota.printable(totals["hard"]),
    }


def _annotations(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def _reservation_operations(project: Obj, namespace: str) -> list[dict[str, Any]]:
    """Adds the reservation, counts it, and drops the expired ones: the annotations whole, as
    the write is guarded by them (`READS`)."""
    now, annotations = _now(), _annotations(project)
    _, expired = quota.reservations(annotations, now)
    kept = {k: v for k, v in annotations.items() if k not in expired}
    kept[quota.reservation_key(namespace)] = now.isoformat(timespec="seconds")
    kept[quota.RESERVATION_COUNT] = quota.next_count(annotations)
    return [jsonpatch.add(project, ("metadata", "annotations"), kept)]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
