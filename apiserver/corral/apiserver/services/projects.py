"""Projects: which the caller sees; creating one (its Project, the namespaces it needs and its
creator's owner binding); changing its names, Pod Security level and quota; deleting it; and
what happened to it (its events).

Quota changes are checked against what the project's namespaces have and use, so a change that
would not fit is refused before anything is written; the write is conditional on the version
checked (`services.admission`), so no concurrent change slips between.
"""

from __future__ import annotations

from typing import Any

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, either, name_text, referenced
from corral.apiserver.services import admission, bindings, podsecurity
from corral.apiserver.services.admission import default_of, limit_of, project_id
from corral.apiserver.services.visibility import (
    require_project_owner,
    settle_cluster,
    visible_cluster,
)
from corral.apiserver.state.downstream import downstream_namespaces
from corral.core import errors
from corral.core.api import ids, names
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.projects import defaults, quota
from corral.core.projects.podsecurity import PROJECT_FIELD

QUOTA_PARTS = ("resourceQuota", "namespaceDefaultResourceQuota", "containerDefaultResourceLimit")


def visible(deps: Deps, who: Caller, cluster: str | None) -> list[Obj]:
    """The projects the caller has a role in, of one cluster when `cluster` names one."""
    stores = deps.stores
    objs = stores.projects.by_index("cluster", cluster) if cluster else stores.projects.all()
    return [obj for obj in objs if who.access.project_role(project_id(obj))]


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    """A project in a cluster the caller is a member of, the caller its owner."""
    if body.get("type", "project") != "project":
        raise errors.invalid("type", "type must be project")
    display = name_text(body, "displayName") or name_text(body, "name")
    if not display:
        raise errors.missing("displayName")
    cluster = either(body, ("clusterId", "clusterName"), 63)
    await settle_cluster(deps, who, cluster)
    referenced(lambda: visible_cluster(deps, who, cluster), "clusterId", f"cluster {cluster}")
    if who.access.cluster_role(cluster) is None:
        raise errors.forbidden(f"only members of cluster {cluster} may create projects in it")
    spec: dict[str, Any] = {
        "displayName": display,
        "description": description_text(body),
        "clusterName": cluster,
        **{k: v for k, v in quota_spec(body, {}).items() if v},
    }
    if level := podsecurity.chosen_level(deps, who, body, cluster):
        spec[PROJECT_FIELD] = level
    return await _create(deps, cluster, spec, who.user_id)


async def _create(deps: Deps, cluster: str, spec: dict[str, Any], creator: str) -> Obj:
    """The Project in its cluster's namespace, with its backing namespace (where its role
    bindings live) and the creator bound as its owner, so the creator sees it at once."""
    name = ids.generate("p")
    await ensure_namespace(deps.kube, cluster, {names.LABEL_CLUSTER: cluster})
    # With the operator's finalizer from the start: deleted before the operator first saw
    # it, the project still has its namespaces removed downstream.
    metadata = ObjectMeta(
        name=name,
        namespace=cluster,
        annotations={names.ANNOTATION_CREATOR: creator},
        finalizers=[names.FINALIZER_OPERATOR],
    )
    created = as_dict(await deps.kube.create(kinds.Project(metadata=metadata, spec=spec)))
    await ensure_namespace(
        deps.kube,
        names.backing_namespace(cluster, name),
        names.backing_namespace_labels(cluster, name),
    )
    deps.stores.projects.put(created)
    await bindings.bind_creator(deps, created, creator)
    return created


def may_change(who: Caller, obj: Obj) -> None:
    require_project_owner(who, project_id(obj), "change it")


async def update(deps: Deps, who: Caller, obj: Obj, body: dict[str, Any]) -> Obj:
    """Changes are checked against, and written on condition of, one version of the Project:
    two updates at once both land (the second is checked and merged again) or one gets 409."""
    spec = obj.get("spec") or {}
    for field in ("clusterId", "clusterName"):
        if field in body and body[field] != spec.get("clusterName"):
            raise errors.invalid(field, "a project cannot move to another cluster", "InvalidAction")
    fixed: dict[str, Any] = {}
    display = name_text(body, "displayName") or name_text(body, "name")
    if display:
        fixed["displayName"] = display
    if "description" in body:
        fixed["description"] = description_text(body)
    if PROJECT_FIELD in body:
        fixed[PROJECT_FIELD] = podsecurity.chosen_level(
            deps, who, body, spec["clusterName"], spec.get(PROJECT_FIELD, "")
        )

    async def change(current: Obj) -> list[dict[str, Any]]:
        patch = dict(fixed)
        if any(part in body for part in QUOTA_PARTS):
            merged = quota_spec(body, current.get("spec") or {})
            await admission.check_quota_change(deps, current, merged)
            patch |= {part: merged.get(part) or {} for part in QUOTA_PARTS}
        return [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in patch.items()]

    return await admission.update(deps, obj, change)


def quota_spec(body: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The quota parts of a project spec after applying `body` to `current`, validated."""
    merged = {part: current.get(part) for part in QUOTA_PARTS if current.get(part)}
    for part in ("resourceQuota", "namespaceDefaultResourceQuota"):
        if part in body:
            merged[part] = quota.parse_quota(body[part], part)
    if "containerDefaultResourceLimit" in body:
        field = "containerDefaultResourceLimit"
        defaults_ = quota.parse_limits(body[field], field, quota.CONTAINER_DEFAULT_FIELDS)
        quota.check_container_defaults(defaults_)
        merged[field] = defaults_ or None
    quota.check_project_quota(limit_of(merged), default_of(merged))
    return merged


def may_delete(who: Caller, obj: Obj) -> None:
    """Its owners remove a project, but for a cluster's own (System, Default), which stay."""
    require_project_owner(who, project_id(obj), "delete it")
    role = (obj["metadata"].get("labels") or {}).get(defaults.LABEL_ROLE)
    if role:
        raise errors.Invalid(
            f"the {role} project of a cluster cannot be deleted", code="InvalidAction"
        )


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    """Removes a project; the operator deletes its namespaces."""
    may_delete(who, obj)
    meta = obj["metadata"]
    await delete_if_present(deps.kube, kinds.Project, meta["name"], meta["namespace"])


async def events(deps: Deps, obj: Obj) -> list[tuple[str, Obj]]:
    """The events of the Project itself (management cluster, origin `project`) and of
    everything in its namespaces (its cluster, origin `cluster`)."""
    cluster, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    own = deps.kube.list(Event, namespace=cluster, fields={"involvedObject.name": name})
    found = [("project", as_dict(event)) async for event in own]
    members = {
        n["metadata"]["name"]
        for n in (await downstream_namespaces(deps.connections, cluster)).by_index(
            "project", project_id(obj)
        )
    }
    if members:
        client: AsyncClient = await deps.connections.client(cluster)
        try:
            async for event in client.list(Event, namespace="*"):
                data = as_dict(event)
                if data["metadata"].get("namespace") in members:
                    found.append(("cluster", data))
        except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is a 503
            raise errors.Unavailable(f"cannot read events of cluster {cluster}: {exc}") from None
    return found
