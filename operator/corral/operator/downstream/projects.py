"""Projects: their backing namespaces and creators in the management cluster, and what they
put into their downstream cluster (quotas, container defaults, role bindings, isolation).

The work runs inside each cluster's daemon (`clusters.py`), right after it has looked at the
cluster: one pass computes everything the cluster's projects want downstream
(`corral.core.projects.downstream`), applies only what differs, and writes each project's
conditions. Projects and bindings come from kopf indices, fed by kopf's own watches, so a pass
reads nothing from the management cluster.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event, LimitRange, Namespace, ResourceQuota
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, RoleBinding
from lightkube.types import PatchType

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.credential import client_for
from corral.core.projects import defaults, downstream, roles, status
from corral.core.projects.downstream import Binding, Key, ProjectView
from corral.operator import connections
from corral.operator.mirror import Mirror

log = logging.getLogger(__name__)

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


# -- what kopf keeps for us ---------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectSnapshot:
    name: str
    uid: str
    spec: Mapping[str, Any]
    labels: Mapping[str, str]
    creator: str | None
    deleting: bool
    status: Mapping[str, Any]

    def view(self) -> ProjectView:
        spec = self.spec
        return ProjectView(
            name=self.name,
            namespace_quota=(spec.get("namespaceDefaultResourceQuota") or {}).get("limit") or {},
            container_defaults=spec.get("containerDefaultResourceLimit") or {},
            system=self.labels.get(defaults.LABEL_ROLE) == "system",
        )


@kopf.index(names.GROUP, names.VERSION, names.PROJECT.plural)
def projects_by_cluster(
    name: str, namespace: str | None, body: kopf.Body, **_: Any
) -> dict[str | None, ProjectSnapshot]:
    meta = body["metadata"]
    return {
        namespace: ProjectSnapshot(
            name=name,
            uid=meta.get("uid", ""),
            spec=dict(body.get("spec") or {}),
            labels=dict(meta.get("labels") or {}),
            creator=(meta.get("annotations") or {}).get(names.ANNOTATION_CREATOR),
            deleting=bool(meta.get("deletionTimestamp")),
            status=dict(body.get("status") or {}),
        )
    }


@kopf.index(names.GROUP, names.VERSION, names.PROJECT_ROLE_TEMPLATE_BINDING.plural)
def project_bindings_by_cluster(
    name: str, namespace: str | None, spec: kopf.Spec, **_: Any
) -> dict[str, Binding] | None:
    project = ScopedId.parse_or_none(spec.get("projectName"))
    # Only a binding in its project's backing namespace counts: that is where the API puts
    # them, and where deleting the project removes them.
    if project is None or namespace != names.backing_namespace(project.namespace, project.name):
        return None
    binding = Binding(name, spec["userName"], spec["roleTemplateName"], project.name)
    return {project.namespace: binding}


@kopf.index(names.GROUP, names.VERSION, names.CLUSTER_ROLE_TEMPLATE_BINDING.plural)
def cluster_bindings_by_cluster(
    name: str, namespace: str | None, spec: kopf.Spec, **_: Any
) -> dict[str, Binding] | None:
    if namespace is None or spec.get("clusterName") != namespace:
        return None
    return {namespace: Binding(name, spec["userName"], spec["roleTemplateName"])}


@kopf.index("", "v1", "namespaces", labels={names.LABEL_BACKING_PROJECT: kopf.PRESENT})
def backing_namespaces(name: str, labels: kopf.Labels, **_: Any) -> dict[str, str]:
    return {labels.get(names.LABEL_CLUSTER, ""): name}


@dataclass(frozen=True)
class Indices:
    projects: kopf.Index[str, ProjectSnapshot]
    project_bindings: kopf.Index[str, Binding]
    cluster_bindings: kopf.Index[str, Binding]
    backing: kopf.Index[str, str]

    @classmethod
    def of(cls, kwargs: Mapping[str, Any]) -> Indices:
        return cls(
            kwargs["projects_by_cluster"],
            kwargs["project_bindings_by_cluster"],
            kwargs["cluster_bindings_by_cluster"],
            kwargs["backing_namespaces"],
        )


def _wake(memo: kopf.Memo, cluster: str | None) -> None:
    wakeup = memo.get("wakeups", {}).get(cluster)
    if wakeup is not None:
        wakeup.set()


@kopf.on.event(names.GROUP, names.VERSION, names.PROJECT.plural)
@kopf.on.event(names.GROUP, names.VERSION, names.CLUSTER_ROLE_TEMPLATE_BINDING.plural)
async def wake_for_cluster_object(
    type: str | None, namespace: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    """A project or cluster binding changed: its cluster's daemon makes a pass now. Status
    writes do not move `generation`, so the daemon's own writes do not wake it again."""
    if _spec_changed(memo, type, body):
        _wake(memo, namespace)


@kopf.on.event(names.GROUP, names.VERSION, names.PROJECT_ROLE_TEMPLATE_BINDING.plural)
async def wake_for_project_binding(
    type: str | None, spec: kopf.Spec, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    if _spec_changed(memo, type, body) and (
        project := ScopedId.parse_or_none(spec.get("projectName"))
    ):
        _wake(memo, project.namespace)


def _spec_changed(memo: kopf.Memo, event: str | None, body: kopf.Body) -> bool:
    seen: dict[str, Any] = memo.setdefault("generations", {})
    uid = body["metadata"].get("uid", "")
    if event == "DELETED":
        seen.pop(uid, None)
        return True
    generation = (body["metadata"].get("generation"), body["metadata"].get("deletionTimestamp"))
    changed = seen.get(uid) != generation
    seen[uid] = generation
    return changed


@kopf.on.delete(names.GROUP, names.VERSION, names.PROJECT.plural)
async def remove_project(name: str, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a project deletes its namespaces downstream (and everything in them) and its
    backing namespace (with its role bindings). When the whole cluster is being removed from
    corral, the downstream namespaces stay: removing management must not remove workloads."""
    kube: AsyncClient = memo.kube
    assert namespace is not None  # projects are namespaced
    if not await _cluster_leaving(kube, namespace):
        credential = await connections.credential(kube, namespace)
        if credential is not None:
            client = client_for(credential)
            try:
                project_id = str(ScopedId(namespace, name))
                async for ns in client.list(Namespace):
                    meta = as_dict(ns)["metadata"]
                    if (meta.get("annotations") or {}).get(names.ANNOTATION_PROJECT) == project_id:
                        await delete_if_present(client, Namespace, meta["name"])
            except Exception as exc:  # retried until the cluster answers
                raise kopf.TemporaryError(
                    f"cannot delete the project's namespaces: {exc}", 10
                ) from exc
            finally:
                await client.close()
    await delete_if_present(kube, Namespace, names.backing_namespace(namespace, name))


async def _cluster_leaving(kube: AsyncClient, cluster: str) -> bool:
    try:
        obj = await kube.get(kinds.Cluster, cluster)
    except ApiError as exc:
        if exc.status.code == 404:
            return True
        raise
    return bool(obj["metadata"].get("deletionTimestamp"))


# -- one pass -----------------------------------------------------------------------------------


class ProjectSync:
    """What a cluster's daemon keeps between passes for the cluster's projects."""

    def __init__(self, kube: AsyncClient, cluster: str, indices: Indices) -> None:
        self.kube = kube
        self.cluster = cluster
        self.indices = indices
        self.managed: dict[Key, dict[str, Any]] = {}
        self.listed_at = 0.0
        # What the last downstream pass saw and left pending: an unchanged cluster with
        # nothing pending needs no new pass (computing one costs CPU in proportion to the
        # number of namespaces).
        self.last_inputs: tuple[Any, ...] | None = None
        self.pending: dict[str, dict[str, int]] = {}

    def projects(self) -> list[ProjectSnapshot]:
        return [p for p in self.indices.projects.get(self.cluster, []) if not p.deleting]

    async def run(
        self, client: AsyncClient | None, namespaces: Mirror | None, ready: bool, isolate: bool
    ) -> None:
        """One pass. `client` and `namespaces` are None while the cluster cannot be reached."""
        projects = self.projects()
        await self._ensure_management_side(projects)
        pending: dict[str, dict[str, int]] = {}
        reachable = client is not None and namespaces is not None
        if client is not None and namespaces is not None:
            if ready:
                await self._ensure_default_projects(client, projects, namespaces.objects)
            inputs = self._inputs(namespaces, projects, isolate)
            relist = time.monotonic() - self.listed_at > RELIST_INTERVAL
            if relist or inputs != self.last_inputs or any(self.pending.values()):
                self.pending = await self._apply(client, namespaces.objects, projects, isolate)
                self.last_inputs = inputs
            pending = self.pending
        counts: dict[str, int] = {}
        for ns in (namespaces.objects if namespaces is not None else {}).values():
            if member_of := downstream.project_of(ns, self.cluster):
                counts[member_of] = counts.get(member_of, 0) + 1
        backing = set(self.indices.backing.get(self.cluster, []))
        creators = self._creator_bound(projects)
        for project in projects:
            namespace = names.backing_namespace(self.cluster, project.name)
            observed = status.Observed(
                backing_namespace=namespace,
                backing_exists=namespace in backing,
                creator=project.creator,
                creator_bound=project.name in creators,
                reachable=reachable,
                isolate=isolate,
                system=project.view().system,
                namespaces=counts.get(project.name, 0),
                pending=pending.get(project.name, {}),
            )
            await self._write_status(project, observed)

    def _inputs(
        self, namespaces: Mirror, projects: list[ProjectSnapshot], isolate: bool
    ) -> tuple[Any, ...]:
        return (
            namespaces.changes,
            isolate,
            frozenset((p.name, repr(p.view())) for p in projects),
            frozenset(self.indices.project_bindings.get(self.cluster, [])),
            frozenset(self.indices.cluster_bindings.get(self.cluster, [])),
        )

    # -- management cluster ---------------------------------------------------------------------

    async def _ensure_management_side(self, projects: list[ProjectSnapshot]) -> None:
        backing = set(self.indices.backing.get(self.cluster, []))
        bound = self._creator_bound(projects)
        for project in projects:
            namespace = names.backing_namespace(self.cluster, project.name)
            if namespace not in backing:
                labels = names.backing_namespace_labels(self.cluster, project.name)
                await ensure_namespace(self.kube, namespace, labels)
            done = conditions.is_true(project.status.get("conditions") or [], ct.CREATOR_MADE_OWNER)
            if project.creator and project.name not in bound and not done:
                await self._bind_creator(project, namespace)

    def _creator_bound(self, projects: list[ProjectSnapshot]) -> set[str]:
        """The projects whose creator is their owner (the API binds the creator as it creates
        the project; a pass binds them if that failed)."""
        owners = {
            (b.project, b.user)
            for b in self.indices.project_bindings.get(self.cluster, [])
            if b.role == roles.PROJECT_OWNER
        }
        return {p.name for p in projects if (p.name, p.creator) in owners}

    async def _bind_creator(self, project: ProjectSnapshot, namespace: str) -> None:
        """Under the name the API gives the same grant, so at most one of them creates it."""
        assert project.creator is not None  # only projects with a creator get here
        name = roles.project_binding_name(project.creator, roles.PROJECT_OWNER)
        binding = kinds.ProjectRoleTemplateBinding(
            metadata=ObjectMeta(name=name, namespace=namespace),
            spec={
                "projectName": str(ScopedId(self.cluster, project.name)),
                "userName": project.creator,
                "roleTemplateName": roles.PROJECT_OWNER,
            },
        )
        try:
            await self.kube.create(binding)
        except ApiError as exc:
            if exc.status.code != 409:
                raise

    async def _ensure_default_projects(
        self,
        client: AsyncClient,
        projects: list[ProjectSnapshot],
        namespaces: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """Default and System, once the cluster is Ready; each starts with its namespaces."""
        present = {p.name for p in projects}
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
                await self.kube.create(project)
            except ApiError as exc:
                if exc.status.code != 409:
                    raise
                continue  # it exists; its namespaces were given to it when it was created
            log.info("cluster %s: created the %s project %s", self.cluster, which, name)
            for namespace in defaults.STARTING_NAMESPACES[which]:
                found = namespaces.get(namespace)
                if found is not None and downstream.project_of(found, self.cluster) is None:
                    await assign(client, self.cluster, namespace, name)

    # -- downstream -----------------------------------------------------------------------------

    async def _apply(
        self,
        client: AsyncClient,
        namespaces: Mapping[str, Mapping[str, Any]],
        projects: list[ProjectSnapshot],
        isolate: bool,
    ) -> dict[str, dict[str, int]]:
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
            {p.name: p.view() for p in projects},
            self.indices.project_bindings.get(self.cluster, []),
            self.indices.cluster_bindings.get(self.cluster, []),
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

    async def _write_status(self, project: ProjectSnapshot, observed: status.Observed) -> None:
        current = list(project.status.get("conditions") or [])
        merged = conditions.merge(current, status.project_conditions(observed, current), _now())
        new = {"backingNamespace": observed.backing_namespace, "conditions": merged}
        if {**project.status, **new} == dict(project.status):
            return
        try:
            await self.kube.patch(kinds.Project.Status, project.name, {"status": new},
                                  namespace=self.cluster, patch_type=PatchType.MERGE)  # fmt: skip
        except ApiError as exc:
            if exc.status.code == 404:
                return  # deleted meanwhile
            raise
        before = {c["type"]: c.get("status") for c in current}
        for condition in merged:
            if before.get(condition["type"]) != condition["status"] and (
                condition["status"] == "True" or before.get(condition["type"]) == "True"
            ):
                await post_event(self.kube, self.cluster, project, condition)


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
    kube: AsyncClient, cluster: str, project: ProjectSnapshot, condition: Mapping[str, Any]
) -> None:
    """A Kubernetes event on the Project for each condition that becomes True (or stops being
    True): what `/v3/projects/{id}/events` shows of the project's own life."""
    now = _now()
    ok = condition["status"] == "True"
    event = Event(
        metadata=ObjectMeta(generateName=f"{project.name}.", namespace=cluster),
        involvedObject=ObjectReference(
            apiVersion=names.API_VERSION,
            kind=names.PROJECT.kind,
            name=project.name,
            namespace=cluster,
            uid=project.uid,
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
        await kube.create(event)
    except ApiError as exc:
        log.info("cannot post an event for project %s: %s", project.name, exc)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
