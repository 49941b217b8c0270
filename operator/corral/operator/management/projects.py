"""Projects, their management side: each has its backing namespace (which holds its role
bindings), its creator is made its owner once, and a deleted project takes its namespaces and
its secrets (kept in svc-system, `corral.core.projects.secrets`) with it.

A project keeper runs per cluster beside the cluster's agent, woken by the same changes
(projects, bindings, backing namespaces, project secrets): it creates only what is missing,
and removes the secrets of a project that is gone, so a pass with nothing to do makes no call.
What the project's conditions say of this is written by the agent's project sync, which sees
the same informers.

A project secret cannot be owned by its Project for the garbage collector: a namespaced owner
must be in its dependent's namespace, and a Project is in its cluster's namespace, not in
svc-system. So the deletion handler removes them, and the keeper removes any that an API
server stored while the project was going (after the handler had looked).
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Secret

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.errors import Unavailable
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.projects import roles, secrets
from corral.operator.state import BY_CLUSTER, State, creator_of
from corral.operator.wakeups import Wake, Wakeups

log = logging.getLogger(__name__)

RETRY_INTERVAL = 5.0


class ProjectKeeper:
    def __init__(self, cluster: str, state: State) -> None:
        self.cluster = cluster
        self.state = state
        self.wakeups = Wakeups()

    def wake(self, reason: Wake) -> None:
        if reason is Wake.PROJECT:
            self.wakeups.add(reason)

    async def run(self) -> None:
        """Pass after pass, until cancelled; a pass that fails is tried again."""
        await self.state.synced()
        self.wake(Wake.PROJECT)
        while True:
            await self.wakeups.wait()
            self.wakeups.take()
            try:
                await self.keep()
            except Exception as exc:  # noqa: BLE001 - tried again, never fatal
                log.warning("cluster %s: projects' management side failed: %s", self.cluster, exc)
                self.wakeups.after(RETRY_INTERVAL, Wake.RETRY)

    async def keep(self) -> None:
        projects = self.state.projects_of(self.cluster)
        backing = self.state.backing_namespaces_of(self.cluster)
        bound = self.state.creators_bound(self.cluster, projects)
        for project in projects:
            name = project["metadata"]["name"]
            namespace = names.backing_namespace(self.cluster, name)
            if namespace not in backing:
                labels = names.backing_namespace_labels(self.cluster, name)
                await ensure_namespace(self.state.kube, namespace, labels)
            # Done once: an owner may later remove that binding, and it must not come back.
            done = conditions.is_true(
                (project.get("status") or {}).get("conditions") or [], ct.CREATOR_MADE_OWNER
            )
            if creator_of(project) and name not in bound and not done:
                await self._bind_creator(project, namespace)
        await self._remove_orphaned_secrets()

    async def _remove_orphaned_secrets(self) -> None:
        """The secrets of projects that are gone: checked against the management cluster
        itself before removal, as the informer of projects may lag behind that of secrets."""
        present = {
            p["metadata"]["name"] for p in self.state.projects.by_index(BY_CLUSTER, self.cluster)
        }
        for project in self.state.project_secrets_of(self.cluster).keys() - present:
            found = self.state.kube.list(
                kinds.Project, namespace=self.cluster, fields={"metadata.name": project}
            )
            if not [p async for p in found]:
                await remove_secrets(self.state.kube, self.cluster, project)

    async def _bind_creator(self, project: Obj, namespace: str) -> None:
        """Under the name the API gives the same grant, so at most one of them creates it."""
        creator = creator_of(project)
        assert creator is not None  # only projects with a creator get here
        binding = kinds.ProjectRoleTemplateBinding(
            metadata=ObjectMeta(
                name=roles.project_binding_name(creator, roles.PROJECT_OWNER),
                namespace=namespace,
            ),
            spec={
                "projectName": str(ScopedId(self.cluster, project["metadata"]["name"])),
                "userName": creator,
                "roleTemplateName": roles.PROJECT_OWNER,
            },
        )
        try:
            self.state.project_bindings.put(as_dict(await self.state.kube.create(binding)))
        except ApiError as exc:
            if exc.status.code != 409:
                raise


@kopf.on.delete(names.GROUP, names.VERSION, names.PROJECT.plural)
async def remove_project(name: str, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a project deletes its namespaces downstream (and everything in them), its
    secrets and its backing namespace (with its role bindings). When the whole cluster is
    being removed from corral, the downstream namespaces stay (with the copies of the project's
    secrets): removing management must not remove workloads."""
    state: State = memo.state
    assert namespace is not None  # projects are namespaced
    if not await _cluster_leaving(state.kube, namespace):
        try:
            client = await state.connections.client(namespace)
        except Unavailable:
            client = None  # no credential: corral never put anything there
        if client is not None:
            try:
                await _remove_namespaces(client, ScopedId(namespace, name))
            except Exception as exc:  # retried until the cluster answers
                raise kopf.TemporaryError(
                    f"cannot delete the project's namespaces: {exc}", 10
                ) from exc
    await remove_secrets(state.kube, namespace, name)
    await delete_if_present(state.kube, Namespace, names.backing_namespace(namespace, name))


async def remove_secrets(kube: AsyncClient, cluster: str, project: str) -> None:
    """The project's secrets in svc-system, read from the management cluster itself: one an
    API server stored a moment ago may not be in the operator's informer yet."""
    found = kube.list(
        Secret,
        namespace=names.SYSTEM_NAMESPACE,
        labels={**secrets.project_secret_labels(cluster, project)},
    )
    for obj in [as_dict(o) async for o in found]:
        if secrets.source_project(obj) == (cluster, project):
            await delete_if_present(kube, Secret, obj["metadata"]["name"], names.SYSTEM_NAMESPACE)


async def _remove_namespaces(client: AsyncClient, project: ScopedId) -> None:
    async for ns in client.list(Namespace):
        meta = as_dict(ns)["metadata"]
        if (meta.get("annotations") or {}).get(names.ANNOTATION_PROJECT) == str(project):
            await delete_if_present(client, Namespace, meta["name"])


async def _cluster_leaving(kube: AsyncClient, cluster: str) -> bool:
    try:
        obj = await kube.get(kinds.Cluster, cluster)
    except ApiError as exc:
        if exc.status.code == 404:
            return True
        raise
    return bool(obj["metadata"].get("deletionTimestamp"))
