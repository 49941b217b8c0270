"""Project sync: what a cluster's projects put into the cluster (quotas, container defaults,
role bindings, isolation), the Default and System projects, and each project's conditions.

Runs inside the cluster's agent: one pass computes everything the cluster's projects want
downstream (`corral.core.projects.downstream`), applies only what differs, and writes each
project's conditions as the field manager `corral-projects`. Projects, bindings and backing
namespaces come from the operator's informers (`corral.operator.state`), so a pass reads
nothing from the management cluster; downstream namespaces from the cluster's own informer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, LimitRange, Namespace, ResourceQuota
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, RoleBinding
from lightkube.types import PatchType

from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.core.projects import defaults, downstream, status
from corral.core.projects.downstream import Key, ProjectView
from corral.operator.state import State, creator_of

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-projects"
# How often the objects corral manages downstream are listed again, to notice hand edits.
RELIST_INTERVAL = 60.0
# Writes in flight at once to one cluster while a pass applies what differs.
WRITE_CONCURRENCY = 8
KIND_RESOURCES: dict[str, Any] = {
    "ResourceQuota": ResourceQuota,
    "LimitRange": LimitRange,
    "RoleBinding": RoleBinding,
    "NetworkPolicy": NetworkPolicy,
    "ClusterRoleBinding": ClusterRoleBinding,
    "ClusterRole": ClusterRole,
}
MANAGED = {names.LABEL_MANAGED_BY: names.MANAGED_BY}


def view(project: Obj) -> ProjectView:
    """What the project's downstream objects depend on."""
    spec = project.get("spec") or {}
    labels = project["metadata"].get("labels") or {}
    return ProjectView(
        name=project["metadata"]["name"],
        namespace_quota=(spec.get("namespaceDefaultResourceQuota") or {}).get("limit") or {},
        container_defaults=spec.get("containerDefaultResourceLimit") or {},
        system=labels.get(defaults.LABEL_ROLE) == "system",
    )


class ProjectSync:
    """What a cluster's agent keeps between passes for the cluster's projects."""

    def __init__(self, cluster: str, state: State, writer: StatusWriter) -> None:
        self.cluster = cluster
        self.state = state
        self.writer = writer
        self.managed: dict[Key, dict[str, Any]] = {}
        self.listed_at = 0.0
        # What the last downstream pass saw and left pending: an unchanged cluster with
        # nothing pending needs no new pass (computing one costs CPU in proportion to the
        # number of namespaces).
        self.last_inputs: tuple[Any, ...] | None = None
        self.pending: dict[str, dict[str, int]] = {}

    async def run(
        self, client: AsyncClient | None, namespaces: Informer | None, ready: bool, isolate: bool
    ) -> bool:
        """One pass; whether it left work pending. `client` and `namespaces` are None while
        the cluster cannot be reached."""
        projects = self.state.projects_of(self.cluster)
        pending: dict[str, dict[str, int]] = {}
        reachable = client is not None and namespaces is not None
        if client is not None and namespaces is not None:
            if ready:
                await self._ensure_default_projects(client, projects, namespaces)
            inputs = self._inputs(namespaces, projects, isolate)
            relist = time.monotonic() - self.listed_at > RELIST_INTERVAL
            if relist or inputs != self.last_inputs or any(self.pending.values()):
                self.pending = await self._apply(client, namespaces, projects, isolate)
                self.last_inputs = inputs
            pending = self.pending
        counts: dict[str, int] = {}
        for ns in namespaces.all() if namespaces is not None else []:
            if member_of := downstream.project_of(ns, self.cluster):
                counts[member_of] = counts.get(member_of, 0) + 1
        backing = self.state.backing_namespaces_of(self.cluster)
        creators = self.state.creators_bound(self.cluster, projects)
        for project in projects:
            name = project["metadata"]["name"]
            namespace = names.backing_namespace(self.cluster, name)
            observed = status.Observed(
                backing_namespace=namespace,
                backing_exists=namespace in backing,
                creator=creator_of(project),
                creator_bound=name in creators,
                reachable=reachable,
                isolate=isolate,
                system=view(project).system,
                namespaces=counts.get(name, 0),
                pending=pending.get(name, {}),
            )
            await self._write_status(project, observed)
        return any(pending.values())

    def _inputs(self, namespaces: Informer, projects: list[Obj], isolate: bool) -> tuple[Any, ...]:
        return (
            namespaces.version,
            isolate,
            frozenset((p["metadata"]["name"], repr(view(p))) for p in projects),
            frozenset(self.state.project_bindings_of(self.cluster)),
            frozenset(self.state.cluster_bindings_of(self.cluster)),
        )

    async def _ensure_default_projects(
        self, client: AsyncClient, projects: list[Obj], namespaces: Informer
    ) -> None:
        """Default and System, once the cluster is Ready; each starts with its namespaces."""
        present = {p["metadata"]["name"] for p in projects}
        for which in (defaults.DEFAULT, defaults.SYSTEM):
            name = defaults.project_name(self.cluster, which)
            if name in present:
                continue
            project = kinds.Project(
                metadata=ObjectMeta(
                    name=name,
                    namespace=self.cluster,
                    labels={defaults.LABEL_ROLE: which.lower()},
                ),
                spec={"displayName": which, "clusterName": self.cluster},
            )
            try:
                created = await self.state.kube.create(project)
            except ApiError as exc:
                if exc.status.code != 409:
                    raise
                continue  # it exists; its namespaces were given to it when it was created
            self.state.projects.put(as_dict(created))
            log.info("cluster %s: created the %s project %s", self.cluster, which, name)
            for namespace in defaults.STARTING_NAMESPACES[which]:
                found = namespaces.get(namespace)
                if found is not None and downstream.project_of(found, self.cluster) is None:
                    await assign(client, self.cluster, namespace, name)

    # -- downstream -----------------------------------------------------------------------------

    async def _apply(
        self,
        client: AsyncClient,
        informer: Informer,
        projects: list[Obj],
        isolate: bool,
    ) -> dict[str, dict[str, int]]:
        namespaces = {n["metadata"]["name"]: n for n in informer.all()}
        for name, label in downstream.label_fixes(namespaces.values(), self.cluster).items():
            await _set_label(client, name, label)
        if time.monotonic() - self.listed_at > RELIST_INTERVAL:
            await self._relist(client)
        # What was in a namespace that is gone (or going) went with it: a namespace of the
        # same name made again starts empty, whatever the last listing said.
        self.managed = {
            key: obj
            for key, obj in self.managed.items()
            if not key[1] or (key[1] in namespaces and downstream.active(namespaces[key[1]]))
        }
        wanted = downstream.desired(
            self.cluster,
            namespaces.values(),
            {p["metadata"]["name"]: view(p) for p in projects},
            self.state.project_bindings_of(self.cluster),
            self.state.cluster_bindings_of(self.cluster),
            isolate,
        )
        stale, unwanted = downstream.differences(wanted, self.managed)
        limit = asyncio.Semaphore(WRITE_CONCURRENCY)

        async def put(key: Key) -> None:
            async with limit:
                try:
                    self.managed[key] = await _apply_one(client, wanted[key])
                except ApiError as exc:
                    log.warning("cluster %s: cannot apply %s: %s", self.cluster, key, exc)

        async def drop(key: Key) -> None:
            kind, namespace, name = key
            async with limit:
                try:
                    await delete_if_present(client, KIND_RESOURCES[kind], name, namespace or None)
                    self.managed.pop(key, None)
                except ApiError as exc:
                    log.warning("cluster %s: cannot delete %s: %s", self.cluster, key, exc)

        # Keys to apply and to delete never overlap, and RBAC tolerates a binding that comes
        # before its role: no order to keep.
        await asyncio.gather(*map(put, stale), *map(drop, unwanted))
        return downstream.pending_by_project(wanted, self.managed)

    async def _relist(self, client: AsyncClient) -> None:
        managed: dict[Key, dict[str, Any]] = {}
        for kind, resource in KIND_RESOURCES.items():
            namespace = None if kind.startswith("Cluster") else "*"
            async for obj in client.list(resource, labels=dict(MANAGED), namespace=namespace):
                data = as_dict(obj)
                data["kind"] = kind
                managed[downstream.key_of(data)] = data
        self.managed, self.listed_at = managed, time.monotonic()

    # -- status -----------------------------------------------------------------------------------

    async def _write_status(self, project: Obj, observed: status.Observed) -> None:
        name = project["metadata"]["name"]
        before = (project.get("status") or {}).get("conditions") or []
        try:
            written = await self.writer.apply(
                kinds.Project,
                name,
                self.cluster,
                seen=project,
                conditions=status.project_conditions(observed, before),
                fields={"backingNamespace": observed.backing_namespace},
            )
        except ApiError as exc:
            if exc.status.code == 404:
                return  # deleted meanwhile
            raise
        if written is None:
            return
        self.state.projects.put(written)
        was = {c["type"]: c.get("status") for c in before}
        for condition in (written.get("status") or {}).get("conditions") or []:
            if was.get(condition["type"]) != condition["status"] and (
                condition["status"] == "True" or was.get(condition["type"]) == "True"
            ):
                await post_event(self.state, self.cluster, project, condition)


async def assign(client: AsyncClient, cluster: str, namespace: str, project: str | None) -> None:
    """Put a downstream namespace into a project (None: out of any)."""
    annotations = {names.ANNOTATION_PROJECT: str(ScopedId(cluster, project)) if project else None}
    labels = {names.LABEL_PROJECT: project}
    await client.patch(Namespace, namespace,
                       {"metadata": {"annotations": annotations, "labels": labels}},
                       patch_type=PatchType.MERGE)  # fmt: skip


async def _set_label(client: AsyncClient, namespace: str, project: str | None) -> None:
    await client.patch(Namespace, namespace,
                       {"metadata": {"labels": {names.LABEL_PROJECT: project}}},
                       patch_type=PatchType.MERGE)  # fmt: skip


async def _apply_one(client: AsyncClient, manifest: dict[str, Any]) -> dict[str, Any]:
    resource = KIND_RESOURCES[manifest["kind"]]
    obj = resource.from_dict(manifest) if hasattr(resource, "from_dict") else manifest
    applied = as_dict(await client.apply(obj, force=True))
    applied["kind"] = manifest["kind"]
    return applied


async def post_event(
    state: State, cluster: str, project: Obj, condition: Mapping[str, Any]
) -> None:
    """A Kubernetes event on the Project for each condition that becomes True (or stops being
    True): what `/v3/projects/{id}/events` shows of the project's own life."""
    now = state.clock()
    name = project["metadata"]["name"]
    ok = condition["status"] == "True"
    event = Event(
        metadata=ObjectMeta(generateName=f"{name}.", namespace=cluster),
        involvedObject=ObjectReference(
            apiVersion=names.API_VERSION,
            kind=names.PROJECT.kind,
            name=name,
            namespace=cluster,
            uid=project["metadata"].get("uid", ""),
        ),
        reason=condition["type"] if ok else f"{condition['type']}Lost",
        message=condition.get("message") or condition.get("reason", ""),
        type="Normal" if ok else "Warning",
        source=EventSource(component="corral-operator"),
        firstTimestamp=now,
        lastTimestamp=now,
        count=1,
    )
    try:
        await state.kube.create(event)
    except ApiError as exc:
        log.info("cannot post an event for project %s: %s", name, exc)
