"""What the operator keeps of the management cluster in memory, and how a change there reaches
the cluster it concerns.

One informer per kind the operator reads, each indexed by cluster, and the connection registry
for downstream clusters. Whatever runs for a cluster (its agent, its project keeper) attaches a
route; a change of the cluster's spec or credential, of one of its Node CRs, projects, role
bindings, backing namespaces or project secrets is handed to it at once as a typed wake-up.
Status writes do not move `generation`, so a controller's own writes do not wake it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from lightkube import AsyncClient, operators
from lightkube.resources.core_v1 import Namespace, Secret

from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.connections import Connections
from corral.core.kube.informer import ChangeHook, Informer, Obj
from corral.core.kube.status import Clock
from corral.core.kube.tunnel_leases import Relays
from corral.core.kube.tunnel_proxy import PeerTLS, TunnelProxy
from corral.core.projects import roles, secrets
from corral.core.projects.downstream import Binding
from corral.core.registration.command import Corral
from corral.operator.wakeups import Wake

BY_CLUSTER = "cluster"
Route = Callable[[Wake], None]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _namespace(obj: Obj) -> list[str]:
    return [obj["metadata"].get("namespace", "")]


def _name(obj: Obj) -> list[str]:
    return [obj["metadata"]["name"]]


def _grants(obj: Obj) -> bool:
    """A role to a user or to a group (the CRD allows one of them)."""
    spec = obj.get("spec") or {}
    subject = spec.get("userName") or spec.get("groupPrincipalName")
    return isinstance(subject, str) and isinstance(spec.get("roleTemplateName"), str)


def _project_binding_cluster(obj: Obj) -> list[str]:
    """Only a binding in its project's backing namespace counts: that is where the API puts
    them, and where deleting the project removes them."""
    project = ScopedId.parse_or_none((obj.get("spec") or {}).get("projectName"))
    namespace = obj["metadata"].get("namespace")
    if project is None or namespace != names.backing_namespace(project.namespace, project.name):
        return []
    return [project.namespace] if _grants(obj) else []


def _cluster_binding_cluster(obj: Obj) -> list[str]:
    namespace = obj["metadata"].get("namespace")
    if not namespace or (obj.get("spec") or {}).get("clusterName") != namespace:
        return []
    return [namespace] if _grants(obj) else []


def _backing_cluster(obj: Obj) -> list[str]:
    return [(obj["metadata"].get("labels") or {}).get(names.LABEL_CLUSTER, "")]


def _secret_cluster(obj: Obj) -> list[str]:
    source = secrets.source_project(obj)
    return [source[0]] if source else []


class SpecChanges:
    """Which events change what an object asks for: its arrival, its going, a new generation
    or the start of its deletion. Status and metadata writes are not such changes."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Any, Any]] = {}

    def changed(self, event: str, obj: Obj) -> bool:
        meta = obj["metadata"]
        uid = meta.get("uid") or meta["name"]
        if event == "DELETED":
            self._seen.pop(uid, None)
            return True
        seen = (meta.get("generation"), meta.get("deletionTimestamp"))
        changed = self._seen.get(uid) != seen
        self._seen[uid] = seen
        return changed


class State:
    def __init__(
        self, kube: AsyncClient, clock: Clock = utc_now, corral: Corral | None = None
    ) -> None:
        self.kube = kube
        self.clock = clock
        # Where machines reach the API server: the node command of a pool's machine names it.
        self.corral = corral
        self._routes: dict[str, list[Route]] = {}
        # Told of every change of a Cluster (the shard manager starts and stops runtimes).
        self.cluster_listeners: list[Callable[[], None]] = []
        # The API server replicas hold the agents' tunnels; their relays are checked as
        # corral's external URL is (no URL: tunnelled clusters stay out of reach).
        peer = PeerTLS.of(corral.url, corral.ca) if corral is not None else None
        tunnels = TunnelProxy(Relays(kube, self._credential_changed), peer)
        self.connections = Connections(kube, tunnels, on_change=self._credential_changed)
        cluster_hook = self._hook(Wake.SPEC, _name, spec_only=True)
        self.clusters = Informer(kube, kinds.Cluster, on_change=self._cluster_changed(cluster_hook))
        # Every cluster's Node CRs, held whole (the status writers read their managed
        # fields): the operator's largest informer, so its strings are shared.
        self.nodes = Informer(
            kube,
            kinds.Node,
            {BY_CLUSTER: _namespace},
            namespace="*",
            on_change=self._hook(Wake.NODE, _namespace, spec_only=True),
            share_strings=True,
        )
        self.nodepools = Informer(
            kube,
            kinds.NodePool,
            {BY_CLUSTER: _namespace},
            namespace="*",
            on_change=self._hook(Wake.POOL, _namespace, spec_only=True),
        )
        self.projects = Informer(
            kube,
            kinds.Project,
            {BY_CLUSTER: _namespace},
            namespace="*",
            on_change=self._hook(Wake.PROJECT, _namespace, spec_only=True),
        )
        self.project_bindings = Informer(
            kube,
            kinds.ProjectRoleTemplateBinding,
            {BY_CLUSTER: _project_binding_cluster},
            namespace="*",
            on_change=self._hook(Wake.PROJECT, _project_binding_cluster, spec_only=True),
        )
        self.cluster_bindings = Informer(
            kube,
            kinds.ClusterRoleTemplateBinding,
            {BY_CLUSTER: _cluster_binding_cluster},
            namespace="*",
            on_change=self._hook(Wake.PROJECT, _cluster_binding_cluster, spec_only=True),
        )
        self.backing_namespaces = Informer(
            kube,
            Namespace,
            {BY_CLUSTER: _backing_cluster},
            labels={names.LABEL_BACKING_PROJECT: operators.exists()},
            on_change=self._hook(Wake.PROJECT, _backing_cluster),
        )
        # Read at each use (the catalog, the autoscaler's knobs): a change applies at the next
        # pass, and no pass asks the API for them.
        self.settings = Informer(kube, kinds.Setting)
        # Secrets have no generation: every change of one is a change of what it holds. All
        # of them are in svc-system (`corral.core.projects.secrets`).
        self.project_secrets = Informer(
            kube,
            Secret,
            {BY_CLUSTER: _secret_cluster},
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_PROJECT_SECRET: operators.exists()},
            name="project secrets",
            on_change=self._hook(Wake.PROJECT, _secret_cluster),
        )

    # -- running --------------------------------------------------------------------------------

    def informers(self) -> list[Informer]:
        return [
            self.clusters,
            self.nodes,
            self.nodepools,
            self.projects,
            self.project_bindings,
            self.cluster_bindings,
            self.backing_namespaces,
            self.project_secrets,
            self.settings,
            self.connections.credentials,
        ]

    async def run(self) -> None:
        """Feed every informer and the connection registry. Runs until cancelled."""
        # The registry feeds its own informer, the credentials.
        informers = [i for i in self.informers() if i is not self.connections.credentials]
        tasks = [asyncio.create_task(i.run()) for i in informers]
        tasks.append(asyncio.create_task(self.connections.run()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.connections.close()

    async def synced(self) -> None:
        """Until every informer has listed once: before that, a missing object may only be one
        not listed yet."""
        await asyncio.gather(*(i.synced.wait() for i in self.informers()))

    # -- wake-ups -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def attached(self, cluster: str, *routes: Route) -> Iterator[None]:
        """Hand the cluster's wake-ups to `routes` while the block runs."""
        self._routes.setdefault(cluster, []).extend(routes)
        try:
            yield
        finally:
            remaining = [r for r in self._routes.get(cluster, []) if r not in routes]
            if remaining:
                self._routes[cluster] = remaining
            else:
                self._routes.pop(cluster, None)

    def _credential_changed(self, cluster: str) -> None:
        self.wake(cluster, Wake.CREDENTIAL)

    def wake(self, cluster: str, reason: Wake) -> None:
        for route in self._routes.get(cluster, []):
            route(reason)

    def _cluster_changed(self, hook: ChangeHook) -> ChangeHook:
        def changed(event: str, obj: Obj) -> None:
            hook(event, obj)
            for listener in self.cluster_listeners:
                listener()

        return changed

    def _hook(
        self, reason: Wake, clusters: Callable[[Obj], Iterable[str]], spec_only: bool = False
    ) -> ChangeHook:
        changes = SpecChanges()

        def hook(event: str, obj: Obj) -> None:
            if spec_only and not changes.changed(event, obj):
                return
            for cluster in clusters(obj):
                self.wake(cluster, reason)

        return hook

    # -- questions ------------------------------------------------------------------------------

    def projects_of(self, cluster: str) -> list[Obj]:
        """The cluster's projects, short of those being deleted."""
        found = self.projects.by_index(BY_CLUSTER, cluster)
        return [p for p in found if not p["metadata"].get("deletionTimestamp")]

    def project_bindings_of(self, cluster: str) -> list[Binding]:
        return [
            _binding(obj, ScopedId.parse(obj["spec"]["projectName"]).name)
            for obj in self.project_bindings.by_index(BY_CLUSTER, cluster)
        ]

    def cluster_bindings_of(self, cluster: str) -> list[Binding]:
        return [_binding(obj) for obj in self.cluster_bindings.by_index(BY_CLUSTER, cluster)]

    def project_secrets_of(self, cluster: str) -> dict[str, list[Obj]]:
        """The cluster's project secrets, by project name."""
        found: dict[str, list[Obj]] = {}
        for obj in self.project_secrets.by_index(BY_CLUSTER, cluster):
            source = secrets.source_project(obj)
            if source is not None and not obj["metadata"].get("deletionTimestamp"):
                found.setdefault(source[1], []).append(obj)
        return found

    def backing_namespaces_of(self, cluster: str) -> set[str]:
        return {
            n["metadata"]["name"] for n in self.backing_namespaces.by_index(BY_CLUSTER, cluster)
        }

    def creators_bound(self, cluster: str, projects: Iterable[Obj]) -> set[str]:
        """The projects whose creator is their owner (the API binds the creator as it creates
        the project; the project keeper binds them if that failed)."""
        owners = {
            (b.project, b.user)
            for b in self.project_bindings_of(cluster)
            if b.role == roles.PROJECT_OWNER
        }
        return {
            p["metadata"]["name"]
            for p in projects
            if (p["metadata"]["name"], creator_of(p)) in owners
        }


def _binding(obj: Obj, project: str = "") -> Binding:
    spec = obj["spec"]
    group = spec.get("groupPrincipalName")
    subject = group or spec["userName"]
    return Binding(obj["metadata"]["name"], subject, spec["roleTemplateName"], project, bool(group))


def creator_of(project: Obj) -> str | None:
    creator: str | None = (project["metadata"].get("annotations") or {}).get(
        names.ANNOTATION_CREATOR
    )
    return creator
