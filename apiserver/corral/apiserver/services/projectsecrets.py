"""A project's secrets (issue 12), which every namespace of the project gets a copy of.

A project secret is a Secret in `svc-system` of the management cluster, under a name derived
from its cluster, project and name, labelled with its cluster and project, its name in an
annotation (`corral.core.projects.secrets`); its id is `<project>:<name>`. The operator
copies it into the project's namespaces, except in the cluster `local`, whose namespaces are
the management cluster's own: there corral holds no Secret rights outside `svc-system`, so a
project of `local` has none. Reads go to the management cluster's API on each request: no API
server keeps secret data in memory between requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube.resources.core_v1 import Secret

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.services import secrets as shared
from corral.core import errors
from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.projects import secrets

TYPE = "secret"


def secret_id(obj: Obj) -> str:
    meta = obj["metadata"]
    return str(ScopedId(meta["labels"][names.LABEL_PROJECT_SECRET], secrets.name_of(obj)))


def placed(obj: Obj) -> tuple[str, None]:
    """Its name, and no namespace: a project secret is in every one."""
    return secrets.name_of(obj), None


def _own(project: Obj, obj: Obj) -> bool:
    meta = project["metadata"]
    return secrets.source_project(obj) == (meta["namespace"], meta["name"])


async def visible(deps: Deps, who: Caller, pid: str, query: Mapping[str, str]) -> list[Obj]:
    """The project's secrets; 404 without a role in it. (Nothing in the query narrows the
    listing: the collection filters it.)"""
    project = shared.project(deps, who, pid, writing=False)
    meta = project["metadata"]
    listing = deps.kube.list(
        Secret,
        namespace=names.SYSTEM_NAMESPACE,
        labels={**secrets.project_secret_labels(meta["namespace"], meta["name"])},
    )
    return [obj for obj in [as_dict(o) async for o in listing] if _own(project, obj)]


async def find(deps: Deps, who: Caller, pid: str, wanted_id: str, writing: bool) -> Obj | None:
    """The secret `<project>:<name>` of the project, if it has one."""
    project = shared.project(deps, who, pid, writing)
    cluster, name = project["metadata"]["namespace"], project["metadata"]["name"]
    wanted = ScopedId.parse_or_none(wanted_id)
    if wanted is None or wanted.namespace != name:
        return None
    stored = secrets.stored_name(cluster, name, wanted.name)
    try:
        obj = as_dict(await deps.kube.get(Secret, stored, namespace=names.SYSTEM_NAMESPACE))
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return obj if _own(project, obj) and secrets.name_of(obj) == wanted.name else None


async def create(deps: Deps, who: Caller, pid: str, body: dict[str, Any]) -> Obj:
    project = shared.writable_project(deps, who, pid)
    cluster, name = project["metadata"]["namespace"], project["metadata"]["name"]
    shared.check_type(body, TYPE)
    secret_name, spec = shared.created_spec(body)
    if project["metadata"].get("deletionTimestamp"):
        raise errors.invalid(
            "projectId", f"project {ScopedId.of(project)} is being deleted", "InvalidState"
        )
    if cluster == names.LOCAL_CLUSTER:
        raise errors.invalid(
            "projectId",
            f"the projects of {cluster} (the management cluster) have no project secrets: "
            "corral copies no Secret into its namespaces",
            "InvalidState",
        )
    manifest = secrets.project_secret(
        cluster, name, secret_name, spec, shared.creator_annotation(who)
    )
    taken = f"a secret {secret_name} already exists in the project"
    return await shared.create(deps.kube, manifest, taken)


async def update(deps: Deps, who: Caller, pid: str, current: Obj, body: dict[str, Any]) -> Obj:
    """Replaces what the body gives, keeps the rest; written on condition that the Secret is
    still the version read (409 `Conflict` otherwise, and nothing changes). corral writes it:
    the caller's right to change it was checked when it was found for writing."""
    shared.check_type(body, TYPE)
    spec = shared.updated_spec(body, current, secrets.name_of(current), None)
    return as_dict(await deps.kube.replace(shared.as_secret(shared.replacement(current, spec))))


async def delete(deps: Deps, who: Caller, pid: str, obj: Obj) -> None:
    """The operator removes every copy once the Secret is gone."""
    meta = obj["metadata"]
    await delete_if_present(deps.kube, Secret, meta["name"], meta["namespace"])
