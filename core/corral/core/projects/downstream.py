"""What corral keeps in a downstream cluster for its projects, computed from what it knows.

For every namespace that belongs to a project (annotation `field.svc.io/projectId`):

- a ResourceQuota with the project's namespace default quota, when the project has one;
- a LimitRange with the project's container defaults, when it has them;
- a RoleBinding per project role binding, to the role's ClusterRole (`admin`, `edit`, `view`),
  for a User, or for a Group when the binding names a provider's group (the proxy impersonates
  a user's groups, so the group's members have it and leavers lose it at once);
- with `enableNetworkPolicy` on the cluster, a NetworkPolicy that admits traffic only from the
  same project and the System project (whose DNS and ingress every project needs);
- a copy of each project secret (`corral.core.projects.secrets`).

And cluster-wide: a ClusterRoleBinding per cluster role binding, and the ClusterRole cluster
members are bound to. Every object carries the managed-by label and a stamp of its content, so
a pass compares stamps instead of fields Kubernetes defaults: a hash of the content, or for a
secret's copy the uid and resourceVersion of its source (never a hash of secret data).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.api import names
from corral.core.api.ids import ScopedId
from corral.core.projects import quota, roles, secrets

ANNOTATION_HASH = "management.svc.io/content-hash"
QUOTA_NAME = "corral-project-quota"
LIMIT_RANGE_NAME = "corral-container-defaults"
POLICY_NAME = "corral-project-isolation"

# (kind, namespace, name); namespace is "" for cluster-wide objects.
Key = tuple[str, str, str]
KINDS = ("ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy", "Secret",
         "ClusterRoleBinding", "ClusterRole")  # fmt: skip
STAMPS = (ANNOTATION_HASH, names.ANNOTATION_SECRET_SOURCE)
API_VERSIONS = {
    "ResourceQuota": "v1",
    "LimitRange": "v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "Secret": "v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
}


@dataclass(frozen=True)
class ProjectView:
    """What the downstream objects of a project depend on."""

    name: str
    namespace_quota: Mapping[str, str] = field(default_factory=dict)
    container_defaults: Mapping[str, str] = field(default_factory=dict)
    system: bool = False


@dataclass(frozen=True)
class Binding:
    name: str
    user: str  # a user id, or a group principal when `group`
    role: str
    project: str = ""  # project name for project role bindings
    group: bool = False


def project_of(namespace: Mapping[str, Any], cluster_id: str) -> str | None:
    """The project (name, not id) a downstream namespace belongs to, by its annotation."""
    value = (namespace["metadata"].get("annotations") or {}).get(names.ANNOTATION_PROJECT)
    project = ScopedId.parse_or_none(value)
    return project.name if project and project.namespace == cluster_id else None


def active(namespace: Mapping[str, Any]) -> bool:
    """Objects cannot be created in a namespace being deleted."""
    phase = (namespace.get("status") or {}).get("phase")
    return not namespace["metadata"].get("deletionTimestamp") and phase != "Terminating"


def desired(
    cluster_id: str,
    namespaces: Iterable[Mapping[str, Any]],
    projects: Mapping[str, ProjectView],
    project_bindings: Iterable[Binding],
    cluster_bindings: Iterable[Binding],
    isolate: bool,
    project_secrets: Mapping[str, Iterable[Mapping[str, Any]]] | None = None,
) -> dict[Key, dict[str, Any]]:
    """Every object corral should have in the cluster, by key. `project_secrets` holds each
    project's secrets (by project name), as stored in the management cluster."""
    by_project: dict[str, list[Binding]] = {}
    for binding in project_bindings:
        by_project.setdefault(binding.project, []).append(binding)
    system = next((p.name for p in projects.values() if p.system), None)
    # The objects of one project differ between its namespaces only by namespace: build and
    # hash them once per project, then place a copy in each namespace.
    templates: dict[str, list[dict[str, Any]]] = {}
    wanted: dict[Key, dict[str, Any]] = {}
    for namespace in namespaces:
        name = namespace["metadata"]["name"]
        project = projects.get(project_of(namespace, cluster_id) or "")
        if project is None or not active(namespace):
            continue
        if project.name not in templates:
            bindings = by_project.get(project.name, [])
            owned = (project_secrets or {}).get(project.name, ())
            templates[project.name] = project_objects(project, bindings, isolate, system, owned)
        for template in templates[project.name]:
            placed = {**template, "metadata": {**template["metadata"], "namespace": name}}
            wanted[key_of(placed)] = placed
    wanted[("ClusterRole", "", roles.CLUSTER_MEMBER_CLUSTERROLE)] = _manifest(
        "ClusterRole", roles.CLUSTER_MEMBER_CLUSTERROLE, {}, rules=roles.CLUSTER_MEMBER_RULES
    )
    for binding in cluster_bindings:
        role = roles.CLUSTER_ROLES.get(binding.role)
        if role is not None:
            name = f"corral-{binding.name}"
            grant = _grant(role.downstream_role, binding)
            wanted[("ClusterRoleBinding", "", name)] = _manifest(
                "ClusterRoleBinding", name, {}, **grant
            )
    return wanted


def project_objects(
    project: ProjectView,
    bindings: Iterable[Binding],
    isolate: bool,
    system: str | None,
    project_secrets: Iterable[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """What every namespace of `project` holds, without its namespace."""
    labels = {names.LABEL_PROJECT: project.name}
    objects = []
    if project.namespace_quota:
        hard = quota.resource_quota_hard(project.namespace_quota)
        objects.append(_manifest("ResourceQuota", QUOTA_NAME, labels, spec={"hard": hard}))
    if project.container_defaults:
        limits = quota.limit_range_limits(project.container_defaults)
        objects.append(_manifest("LimitRange", LIMIT_RANGE_NAME, labels, spec={"limits": limits}))
    for binding in bindings:
        role = roles.PROJECT_ROLES.get(binding.role)
        if role is not None:
            grant = _grant(role.downstream_role, binding)
            objects.append(_manifest("RoleBinding", f"corral-{binding.name}", labels, **grant))
    if isolate and not project.system:
        policy = isolation_policy(project.name, system)
        objects.append(_manifest("NetworkPolicy", POLICY_NAME, labels, spec=policy))
    objects.extend(secrets.copy_of(source, project.name) for source in project_secrets)
    return objects


def isolation_policy(project: str, system: str | None) -> dict[str, Any]:
    """Ingress from pods of the same project (and the System project) only. NetworkPolicies
    add up, so an explicit policy in the namespace can still admit more."""
    sources = [{"namespaceSelector": {"matchLabels": {names.LABEL_PROJECT: project}}}]
    if system and system != project:
        sources.append({"namespaceSelector": {"matchLabels": {names.LABEL_PROJECT: system}}})
    return {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": sources}]}


def content_hash(manifest: Mapping[str, Any]) -> str:
    content = {k: v for k, v in manifest.items() if k not in ("metadata", "apiVersion", "kind")}
    content["labels"] = manifest["metadata"].get("labels") or {}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace") or "", meta["name"])


def differences(
    wanted: Mapping[Key, Mapping[str, Any]], existing: Mapping[Key, Mapping[str, Any]]
) -> tuple[list[Key], list[Key]]:
    """(keys to apply, keys to delete): objects missing or changed, and objects not wanted."""
    stale = [key for key, manifest in wanted.items() if stamp(existing.get(key)) != stamp(manifest)]
    unwanted = [key for key in existing if key not in wanted]
    return sorted(stale), sorted(unwanted)


def pending_by_project(
    wanted: Mapping[Key, Mapping[str, Any]], existing: Mapping[Key, Mapping[str, Any]]
) -> dict[str, dict[str, int]]:
    """Per project and kind, how many wanted objects are not (yet) in place."""
    pending: dict[str, dict[str, int]] = {}
    for key, manifest in wanted.items():
        project = (manifest["metadata"].get("labels") or {}).get(names.LABEL_PROJECT)
        if project and stamp(existing.get(key)) != stamp(manifest):
            counts = pending.setdefault(project, {})
            counts[key[0]] = counts.get(key[0], 0) + 1
    return pending


def label_fixes(namespaces: Iterable[Mapping[str, Any]], cluster_id: str) -> dict[str, str | None]:
    """Namespaces whose project label does not match their annotation: the label to set
    (None to remove). The annotation is the contract; the label serves selectors."""
    fixes: dict[str, str | None] = {}
    for namespace in namespaces:
        if not active(namespace):
            continue
        project = project_of(namespace, cluster_id)
        label = (namespace["metadata"].get("labels") or {}).get(names.LABEL_PROJECT)
        if label != project:
            fixes[namespace["metadata"]["name"]] = project
    return fixes


def stamp(obj: Mapping[str, Any] | None) -> str | None:
    """What an object's content is known by: its content hash or the version of its source."""
    if obj is None:
        return None
    annotations = obj["metadata"].get("annotations") or {}
    value = next((annotations[k] for k in STAMPS if k in annotations), None)
    return str(value) if value is not None else None


def _grant(cluster_role: str, binding: Binding) -> dict[str, Any]:
    """roleRef and subjects of a binding of `cluster_role` to a corral user or group (the
    proxy impersonates users by id, and their groups by principal)."""
    api = "rbac.authorization.k8s.io"
    kind = "Group" if binding.group else "User"
    return {
        "roleRef": {"apiGroup": api, "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": api, "kind": kind, "name": binding.user}],
    }


def _manifest(kind: str, name: str, labels: Mapping[str, str], **content: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {names.LABEL_MANAGED_BY: names.MANAGED_BY, **labels},
    }
    manifest = {"apiVersion": API_VERSIONS[kind], "kind": kind, "metadata": meta, **content}
    meta["annotations"] = {ANNOTATION_HASH: content_hash(manifest)}
    return manifest
