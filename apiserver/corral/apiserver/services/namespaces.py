"""A downstream cluster's namespaces and their project membership: who sees and changes them,
creating one, moving one between projects, deleting one.

Membership is the annotation `field.svc.io/projectId: <cluster>:<project>` (with a label for
selectors). Reads come from the API server's watch of the cluster's namespaces. Creating a
namespace in a project, or moving one into it, is checked against the project's quota first
(`services.admission`, which reserves the room on the Project, so two requests on any replicas
cannot both take the last room), and the namespace gets the project's Pod Security labels in
the same write (`services.podsecurity`), so it never runs a pod unjudged; one moved out keeps
them. These writes are corral's own (docs/security.md): a namespace holds nothing of the
user's but its name, and corral's project rules decide.
"""

from __future__ import annotations

import re
from typing import Any

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import text
from corral.apiserver.services import podsecurity
from corral.apiserver.services.admission import admitted
from corral.apiserver.services.visibility import settle_project, visible_cluster
from corral.apiserver.state.downstream import downstream_namespaces
from corral.core import errors
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import roles

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def project_of(obj: Obj) -> str | None:
    project: str | None = (obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_PROJECT)
    return project


def may_see(who: Caller, cluster: str, obj: Obj) -> bool:
    """Cluster members see every namespace; others those of projects they are bound to."""
    if who.access.cluster_role(cluster) is not None:
        return True
    project = project_of(obj)
    return isinstance(project, str) and who.access.project_role(project) is not None


def may_change(who: Caller, cluster: str, project: str | None) -> bool:
    """Namespaces of a project are changed by its owners and members; namespaces outside
    every project by the cluster's owners."""
    if project:
        return roles.may_write_namespaces(who.access.project_role(project))
    return who.access.cluster_role(cluster) == roles.CLUSTER_OWNER


def may_alter(who: Caller, cluster: str, obj: Obj, what: str) -> None:
    """403 unless the caller may `what` (move, delete) the namespace where it is now."""
    project = project_of(obj)
    if not may_change(who, cluster, project):
        raise errors.forbidden(f"you may not {what} namespaces of {project or cluster}")


def may_create(who: Caller, cluster: str, project: str | None) -> bool:
    """Whether a listing offers to create one: to members of the cluster, and in a project."""
    return who.access.cluster_role(cluster) is not None or bool(project)


async def visible(deps: Deps, who: Caller, cluster: str, project: str | None) -> list[Obj]:
    """The namespaces of the cluster the caller sees, of one project when `project` names one;
    404 for a cluster they cannot see."""
    visible_cluster(deps, who, cluster)
    cache = await downstream_namespaces(deps.connections, cluster)
    objs = cache.by_index("project", project) if project else cache.all()
    return [obj for obj in objs if may_see(who, cluster, obj)]


async def find(deps: Deps, who: Caller, cluster: str, name: str) -> Obj | None:
    visible_cluster(deps, who, cluster)
    obj = (await downstream_namespaces(deps.connections, cluster)).get(name)
    return obj if obj is not None and may_see(who, cluster, obj) else None


async def target_project(deps: Deps, who: Caller, cluster: str, value: Any) -> str | None:
    """The `projectId` of a body, checked: a project of this cluster the caller can see."""
    if value in (None, ""):
        return None
    pid = ScopedId.parse_or_none(value)
    if pid is None or pid.namespace != cluster:
        raise errors.invalid("projectId", f"projectId must be a project of cluster {cluster}")
    await settle_project(deps, who, str(pid))
    project = deps.stores.projects.get(pid.key)
    if project is None or who.access.project_role(value) is None:
        raise errors.invalid("projectId", f"project {value} not found", "InvalidReference")
    if project["metadata"].get("deletionTimestamp"):
        raise errors.invalid("projectId", f"project {value} is being deleted", "InvalidState")
    return str(pid)


def _membership(deps: Deps, project: str | None) -> dict[str, Any]:
    """Annotation (the contract) and labels (for selectors, and the project's Pod Security)
    of a namespace in `project`."""
    name = ScopedId.parse(project).name if project else None
    return {
        "annotations": {names.ANNOTATION_PROJECT: project},
        "labels": {names.LABEL_PROJECT: name, **podsecurity.labels_for(deps, project)},
    }


async def create(deps: Deps, who: Caller, cluster: str, body: dict[str, Any]) -> Obj:
    if body.get("type", "namespace") != "namespace":
        raise errors.invalid("type", "type must be namespace")
    name = text(body, "name", max_length=63, required=True)
    if not DNS_LABEL.match(name):
        raise errors.invalid(
            "name", "name must be lower-case letters, digits and '-', starting and ending "
            "with a letter or digit (at most 63)",
        )  # fmt: skip
    project = await target_project(deps, who, cluster, body.get("projectId"))
    if not may_change(who, cluster, project):
        raise errors.forbidden(
            f"you may not create namespaces in {project or f'cluster {cluster} outside projects'}"
        )
    cache = await downstream_namespaces(deps.connections, cluster)
    if cache.get(name) is not None:
        raise errors.conflict(f"namespace {name} already exists in cluster {cluster}")
    membership = _membership(deps, project)
    namespace = Namespace(
        metadata=ObjectMeta(
            name=name,
            annotations={k: v for k, v in membership["annotations"].items() if v},
            labels={k: v for k, v in membership["labels"].items() if v},
        )
    )
    async with admitted(deps, project, name):
        created = as_dict(await (await deps.connections.client(cluster)).create(namespace))
    cache.put(created)
    return created


async def move(deps: Deps, who: Caller, cluster: str, obj: Obj, body: dict[str, Any]) -> Obj:
    """Moves the namespace into `projectId`, or out of every project with an empty value."""
    if "projectId" not in body:
        return obj
    current = project_of(obj)
    project = await target_project(deps, who, cluster, body["projectId"])
    if project == current:
        return obj
    may_alter(who, cluster, obj, "move")
    if not may_change(who, cluster, project):
        raise errors.forbidden(
            f"you may not move namespaces into {project or f'cluster {cluster} outside projects'}"
        )
    client = await deps.connections.client(cluster)
    membership = _membership(deps, project)
    name = obj["metadata"]["name"]
    async with admitted(deps, project, name):
        moved = as_dict(
            await client.patch(
                Namespace, name, {"metadata": membership}, patch_type=PatchType.MERGE
            )
        )
    (await downstream_namespaces(deps.connections, cluster)).put(moved)
    return moved


async def delete(deps: Deps, who: Caller, cluster: str, obj: Obj) -> None:
    may_alter(who, cluster, obj, "delete")
    client = await deps.connections.client(cluster)
    await delete_if_present(client, Namespace, obj["metadata"]["name"])
