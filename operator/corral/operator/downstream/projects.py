"""Project sync: what a cluster's projects put into the cluster (quotas, container defaults,
role bindings, isolation, copies of project secrets, the Pod Security labels of their
namespaces), the Default and System projects, and each project's conditions.

Runs inside the cluster's agent: one pass computes everything the cluster's projects want
downstream (`corral.core.projects.downstream`), applies only what differs, and writes each
project's conditions as the field manager `corral-projects`. Projects, bindings, project
secrets and backing namespaces come from the operator's informers (`corral.operator.state`),
so a pass reads nothing from the management cluster; downstream namespaces, and the objects
this sync made there, from the cluster's own informers: one per kind it writes, of its own
objects only, each cut to what a pass compares (`owned_record`). So a hand edit or removal of
one wakes a pass at once, and at rest nothing is listed.

A project secret's copy never replaces a Secret of the same name that corral does not manage:
the copy is created (not applied) where corral has none, and a namespace that already holds
such a Secret keeps it. The project gets a Warning event naming it, once. The agent watches
that Secret by its name (`held`, at most `MAX_HELD` per cluster), so the copy lands the moment
it goes; every copy held back is also tried again every `CONFLICT_RETRY`, for those beyond
the bound and a watch that cannot list.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient, operators
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import LimitRange, Namespace, ResourceQuota, Secret
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, RoleBinding
from lightkube.types import PatchType

from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter
from corral.core.projects import defaults, downstream, podsecurity, quota, secrets, status
from corral.core.projects.downstream import Key, ProjectView
from corral.operator import events
from corral.operator.state import State, creator_of

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-projects"
# How often a copy of a project secret is tried again where a Secret of someone else's held
# its name.
CONFLICT_RETRY = 60.0
# Secrets of someone else's watched by name at most, per cluster: one watch each.
MAX_HELD = 16
HELD = "held secret "  # the prefix of their informers' names
# Writes in flight at once to one cluster while a pass applies what differs.
WRITE_CONCURRENCY = 8
KIND_RESOURCES: dict[str, Any] = {
    "ResourceQuota": ResourceQuota,
    "LimitRange": LimitRange,
    "RoleBinding": RoleBinding,
    "NetworkPolicy": NetworkPolicy,
    "Secret": Secret,
    "ClusterRoleBinding": ClusterRoleBinding,
    "ClusterRole": ClusterRole,
}
MANAGED = {names.LABEL_MANAGED_BY: names.MANAGED_BY}
# Which of a kind's objects are this sync's, to be removed when unwanted: a Secret must be a
# copy too, so that no Secret of someone else's that happens to carry the managed-by label is
# ever taken for one; a machine's join credential (core/kube/joining.py) is the node pools'.
NOT_A_JOIN_CREDENTIAL = {**MANAGED, names.LABEL_MACHINE: operators.not_exists()}
OWN: dict[str, dict[str, Any]] = {
    "Secret": {**MANAGED, names.LABEL_SECRET_COPY: operators.exists()},
    "ClusterRole": NOT_A_JOIN_CREDENTIAL,
    "ClusterRoleBinding": NOT_A_JOIN_CREDENTIAL,
}
SECRET_NOT_COPIED = "SecretNotCopied"


@dataclass(frozen=True)
class Owned:
    """A kind this sync writes downstream, and which of its objects are this sync's."""

    kind: str
    resource: Any
    labels: dict[str, Any]

    @property
    def plural(self) -> str:
        plural: str = self.resource._api_info.plural
        return plural

    @property
    def namespace(self) -> str | None:
        """All namespaces for a namespaced kind (None would mean the client's own)."""
        return None if self.kind.startswith("Cluster") else "*"


OWNED = [Owned(kind, resource, OWN.get(kind, MANAGED)) for kind, resource in KIND_RESOURCES.items()]


def owned_record(kind: str, obj: Obj) -> Obj:
    """What a pass keeps of an object it manages: its kind, name and stamp compare it with
    what is wanted, and a Secret's type decides how a copy is written; a copy's secret data
    never stays in memory."""
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    kept_meta = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
    if stamps := {k: annotations[k] for k in downstream.STAMPS if k in annotations}:
        kept_meta["annotations"] = stamps
    kept: Obj = {"kind": kind, "metadata": kept_meta}
    if "type" in obj:
        kept["type"] = obj["type"]
    return kept


def held_name(key: Key) -> str:
    return f"{HELD}{key[1]}/{key[2]}"


def released(conflicts: set[Key], held: Mapping[Key, Informer]) -> set[Key]:
    """The copies whose Secret of someone else's is gone: its watch, listed, finds nothing."""
    return {
        key
        for key, informer in held.items()
        if key in conflicts and informer.synced.is_set() and not informer.all()
    }


def retry_conflicts(conflicts: set[Key], due: bool, now: set[Key], before: set[Key]) -> bool:
    """Whether a pass tries the held-back copies again: when their retry is due, and once
    for each copy newly released (`now`, against `before`, the last pass's). A released copy
    that still fails waits for the retry like the rest: trying it on every pass would make
    every pass write."""
    return bool(conflicts) and (due or bool(now - before))


def view(project: Obj, cluster_spec: Mapping[str, Any]) -> ProjectView:
    """What the project's downstream objects depend on: its own quota and container defaults,
    else its cluster's defaults (never for the System project, which holds the cluster's own
    workloads)."""
    spec = project.get("spec") or {}
    labels = project["metadata"].get("labels") or {}
    system = labels.get(defaults.LABEL_ROLE) == "system"
    namespace_quota, container_defaults = quota.effective(spec, {} if system else cluster_spec)
    return ProjectView(
        name=project["metadata"]["name"],
        namespace_quota=namespace_quota,
        container_defaults=container_defaults,
        system=system,
    )


def pod_security_levels(projects: list[Obj], cluster_level: str) -> dict[str, str]:
    """The Pod Security level each project's namespaces enforce, by project name."""
    return {p["metadata"]["name"]: podsecurity.of_project(p, cluster_level) for p in projects}


class ProjectSync:
    """What a cluster's agent keeps between passes for the cluster's projects."""

    def __init__(self, cluster: str, state: State, writer: StatusWriter) -> None:
        self.cluster = cluster
        self.state = state
        self.writer = writer
        # What the last downstream pass saw and left pending: an unchanged cluster with
        # nothing pending needs no new pass (computing one costs CPU in proportion to the
        # number of namespaces).
        self.last_inputs: tuple[Any, ...] | None = None
        self.pending: dict[str, dict[str, int]] = {}
        # Copies of project secrets a namespace holds a Secret of someone else's for, and
        # when they were last tried.
        self.conflicts: set[Key] = set()
        self.conflicts_tried = 0.0
        # Those of them whose Secret is gone, as the last pass saw.
        self.released: set[Key] = set()
        # `local` is the management cluster, where corral holds no Secret rights outside
        # svc-system: its projects have no project secrets (the API refuses them), and its
        # Secrets are never listed.
        self.copies_secrets = cluster != names.LOCAL_CLUSTER
        self.owned = [o for o in OWNED if o.kind != "Secret" or self.copies_secrets]

    async def run(
        self,
        client: AsyncClient | None,
        namespaces: Informer | None,
        owned: Mapping[str, Informer] | None,
        ready: bool,
        cluster_spec: Mapping[str, Any],
        held: Mapping[Key, Informer] | None = None,
    ) -> bool:
        """One pass; whether it left work pending. `client`, `namespaces` and `owned` (the
        informers of `self.owned`, by kind) are None while the cluster cannot be reached;
        `held` are the informers on the Secrets of `held()`, by key."""
        isolate = bool(cluster_spec.get("enableNetworkPolicy"))
        pod_security = podsecurity.cluster_level(cluster_spec.get(podsecurity.CLUSTER_FIELD))
        projects = self.state.projects_of(self.cluster)
        pending: dict[str, dict[str, int]] = {}
        reachable = client is not None and namespaces is not None and owned is not None
        if client is not None and namespaces is not None and owned is not None:
            if ready:
                await self._ensure_default_projects(client, projects, namespaces)
            levels = pod_security_levels(projects, pod_security)
            inputs = (*self._inputs(namespaces, projects, cluster_spec), frozenset(levels.items()),
                      tuple(owned[o.kind].version for o in self.owned))  # fmt: skip
            now_released = released(self.conflicts, held or {})
            retry = retry_conflicts(
                self.conflicts, self._conflicts_due(), now_released, self.released
            )
            self.released = now_released
            if retry or inputs != self.last_inputs or any(self.pending.values()):
                self.pending = await self._apply(
                    client, namespaces, owned, projects, cluster_spec, levels, retry
                )
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
                system=view(project, cluster_spec).system,
                namespaces=counts.get(name, 0),
                pending=pending.get(name, {}),
            )
            await self._write_status(project, observed)
        return any(pending.values())

    def _inputs(
        self, namespaces: Informer, projects: list[Obj], cluster_spec: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        return (
            namespaces.version,
            bool(cluster_spec.get("enableNetworkPolicy")),
            frozenset((p["metadata"]["name"], repr(view(p, cluster_spec))) for p in projects),
            frozenset(self.state.project_bindings_of(self.cluster)),
            frozenset(self.state.cluster_bindings_of(self.cluster)),
            frozenset(
                (s["metadata"]["uid"], s["metadata"].get("resourceVersion"))
                for found in self.state.project_secrets_of(self.cluster).values()
                for s in found
            ),
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

    def _conflicts_due(self) -> bool:
        return time.monotonic() - self.conflicts_tried > CONFLICT_RETRY

    def held(self) -> dict[str, Key]:
        """The copies held back to watch the Secrets of, by their informers' names: the first
        `MAX_HELD` in key order."""
        return {held_name(key): key for key in sorted(self.conflicts)[:MAX_HELD]}

    def conflicts_retry_in(self) -> float | None:
        """Seconds until the conflicting copies are tried again; None when there are none."""
        if not self.conflicts:
            return None
        return max(self.conflicts_tried + CONFLICT_RETRY - time.monotonic(), 0.0)

    async def _apply(
        self,
        client: AsyncClient,
        informer: Informer,
        owned: Mapping[str, Informer],
        projects: list[Obj],
        cluster_spec: Mapping[str, Any],
        levels: Mapping[str, str],
        retry_conflicts: bool,
    ) -> dict[str, dict[str, int]]:
        namespaces = {n["metadata"]["name"]: n for n in informer.all()}
        # One write per namespace for both: the project label and the Pod Security labels.
        fixes: dict[str, dict[str, str | None]] = {
            name: dict(wanted)
            for name, wanted in podsecurity.label_fixes(
                namespaces.values(), self.cluster, levels
            ).items()
        }
        for name, label in downstream.label_fixes(namespaces.values(), self.cluster).items():
            fixes.setdefault(name, {})[names.LABEL_PROJECT] = label
        for name, labels in fixes.items():
            await _set_labels(client, name, labels)
        # What was in a namespace that is gone (or going) went with it: a namespace of the
        # same name made again starts empty, whatever its informer has not heard yet.
        managed = {
            key: obj
            for o in self.owned
            for obj in owned[o.kind].all()
            if not (key := downstream.key_of(obj))[1]
            or (key[1] in namespaces and downstream.active(namespaces[key[1]]))
        }
        wanted = downstream.desired(
            self.cluster,
            namespaces.values(),
            {p["metadata"]["name"]: view(p, cluster_spec) for p in projects},
            self.state.project_bindings_of(self.cluster),
            self.state.cluster_bindings_of(self.cluster),
            bool(cluster_spec.get("enableNetworkPolicy")),
            self.state.project_secrets_of(self.cluster) if self.copies_secrets else None,
        )
        stale, unwanted = downstream.differences(wanted, managed)
        self.conflicts = {key for key in self.conflicts if key in wanted}
        if retry_conflicts:
            self.conflicts_tried = time.monotonic()
        else:
            stale = [key for key in stale if key not in self.conflicts]
        by_name = {p["metadata"]["name"]: p for p in projects}
        limit = asyncio.Semaphore(WRITE_CONCURRENCY)

        async def put(key: Key) -> None:
            async with limit:
                try:
                    if key[0] == "Secret":
                        written = await _write_copy(client, wanted[key], managed.get(key))
                    else:
                        written = await _apply_one(client, wanted[key])
                    managed[key] = written
                    owned[key[0]].put(written)
                    self.conflicts.discard(key)
                except NotOurs:
                    if key not in self.conflicts:
                        self.conflicts.add(key)
                        self.conflicts_tried = time.monotonic()
                        await self._report_conflict(by_name, wanted[key])
                except ApiError as exc:
                    log.warning("cluster %s: cannot apply %s: %s", self.cluster, key, exc)

        async def drop(key: Key) -> None:
            kind, namespace, name = key
            async with limit:
                try:
                    await delete_if_present(client, KIND_RESOURCES[kind], name, namespace or None)
                    managed.pop(key, None)
                    owned[kind].forget(f"{namespace}/{name}" if namespace else name)
                except ApiError as exc:
                    log.warning("cluster %s: cannot delete %s: %s", self.cluster, key, exc)

        # Keys to apply and to delete never overlap, and RBAC tolerates a binding that comes
        # before its role: no order to keep.
        await asyncio.gather(*map(put, stale), *map(drop, unwanted))
        # A Secret of someone else's is no work pending: it stays until they remove it.
        waiting = {k: v for k, v in wanted.items() if k not in self.conflicts}
        return downstream.pending_by_project(waiting, managed)

    async def _report_conflict(self, projects: Mapping[str, Obj], copy: Mapping[str, Any]) -> None:
        meta = copy["metadata"]
        project = projects.get(meta["labels"][names.LABEL_PROJECT])
        message = (
            f"namespace {meta['namespace']} already has a Secret {meta['name']} that corral does "
            "not manage: it is left as it is, and the project secret is not copied there"
        )
        log.warning("cluster %s: %s", self.cluster, message)
        if project is not None:
            await post_warning(self.state, project, SECRET_NOT_COPIED, message)

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
                await post_event(self.state, project, condition)


async def assign(client: AsyncClient, cluster: str, namespace: str, project: str | None) -> None:
    """Put a downstream namespace into a project (None: out of any)."""
    annotations = {names.ANNOTATION_PROJECT: str(ScopedId(cluster, project)) if project else None}
    labels = {names.LABEL_PROJECT: project}
    await client.patch(Namespace, namespace,
                       {"metadata": {"annotations": annotations, "labels": labels}},
                       patch_type=PatchType.MERGE)  # fmt: skip


async def _set_labels(
    client: AsyncClient, namespace: str, labels: Mapping[str, str | None]
) -> None:
    """A merge patch of the namespace's labels (None removes one)."""
    await client.patch(Namespace, namespace, {"metadata": {"labels": dict(labels)}},
                       patch_type=PatchType.MERGE)  # fmt: skip


async def _apply_one(client: AsyncClient, manifest: dict[str, Any]) -> dict[str, Any]:
    resource = KIND_RESOURCES[manifest["kind"]]
    obj = resource.from_dict(manifest) if hasattr(resource, "from_dict") else manifest
    return owned_record(manifest["kind"], as_dict(await client.apply(obj, force=True)))


class NotOurs(Exception):
    """The namespace holds a Secret of that name that is not a copy corral made."""


async def _write_copy(
    client: AsyncClient, manifest: dict[str, Any], known: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A copy of a project secret, written whole (a replace, not an apply: no key of an older
    version may stay behind). Where corral knows of no copy it is created, so that a Secret of
    the same name someone else made is never overwritten; one found to be corral's copy after
    all (made since the last listing) is replaced. A Secret's type cannot change: a copy of
    another type (its source was deleted and made again) is deleted first."""
    meta = manifest["metadata"]
    secret = Secret.from_dict(manifest)
    if known is not None and known.get("type") != manifest["type"]:
        await delete_if_present(client, Secret, meta["name"], meta["namespace"])
    elif known is not None:
        try:
            return owned_record("Secret", as_dict(await client.replace(secret)))
        except ApiError as exc:
            if exc.status.code != 404:
                raise
    try:
        return owned_record("Secret", as_dict(await client.create(secret)))
    except ApiError as exc:
        if exc.status.code != 409:
            raise
    found = as_dict(await client.get(Secret, meta["name"], namespace=meta["namespace"]))
    if not secrets.is_copy(found):
        raise NotOurs(meta["namespace"], meta["name"])
    if known is None:
        return await _write_copy(client, manifest, found)
    return owned_record("Secret", as_dict(await client.replace(secret)))  # made again meanwhile


async def post_event(state: State, project: Obj, condition: Mapping[str, Any]) -> None:
    """A Kubernetes event on the Project for each condition that becomes True (or stops being
    True): what `/v3/projects/{id}/events` shows of the project's own life."""
    ok = condition["status"] == "True"
    await _post(
        state,
        project,
        condition["type"] if ok else f"{condition['type']}Lost",
        condition.get("message") or condition.get("reason", ""),
        "Normal" if ok else "Warning",
    )


async def post_warning(state: State, project: Obj, reason: str, message: str) -> None:
    await _post(state, project, reason, message, "Warning")


async def _post(state: State, project: Obj, reason: str, message: str, kind: str) -> None:
    """An event on the Project, in its cluster's namespace, where the Project is."""
    involved = events.reference(project, names.API_VERSION, names.PROJECT.kind)
    await events.post(state.kube, involved, reason, message, kind, "corral-operator",
                      state.clock())  # fmt: skip
