"""What a project's secrets and its namespaces' secrets share through `/v3`: their fields,
who may write them, the body of a create or an update checked as Kubernetes would
(`corral.core.projects.secrets`), and what a response shows of a Secret.

`data` and `stringData` are write-only: no response carries them, not even the one to the
create that sent them (the client has them). A response shows the keys of `data` (`keys`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret

from corral.apiserver.deps import access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.services.visibility import visible_project
from corral.core import errors
from corral.core.api import names
from corral.core.api.labels import user_annotations, user_labels
from corral.core.errors import Invalid
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.projects import roles, secrets
from corral.core.projects.secrets import SecretSpec


def schema_fields(namespaced: bool) -> dict[str, Field]:
    namespace = (
        Field("reference[namespace]", create=True, required=True)
        if namespaced
        else readonly("reference[namespace]", "Always null: a project secret is in every one")
    )
    return {
        "name": Field("string", create=True, required=True, description="A DNS subdomain"),
        "namespaceId": namespace,
        "projectId": readonly("reference[project]"),
        "kind": Field(
            "enum",
            create=True,
            default=secrets.OPAQUE,
            options=secrets.TYPES,
            description="The Kubernetes Secret type; it cannot change",
        ),
        "data": Field(
            "map[base64]",
            create=True,
            update=True,
            write_only=True,
            description="Key to base64 value, as a Kubernetes Secret's data; never returned",
        ),
        "stringData": Field(
            "map[string]",
            create=True,
            update=True,
            write_only=True,
            description="Key to text, written over data; never returned",
        ),
        "keys": readonly("array[string]", "The keys of data (values are never returned)"),
        "labels": Field("map[string]", create=True, update=True),
        "annotations": Field("map[string]", create=True, update=True),
        "description": Field("string", create=True, update=True),
        "creatorId": readonly("reference[user]"),
        "state": readonly("enum", "active or removing"),
    }


def writable_project(request: web.Request, pid: str) -> Obj:
    """The project, when the caller may write its secrets: 404 without a role, 403 for
    read-only."""
    project = visible_project(deps(request), caller(request), pid)
    if not may_write(request, pid):
        raise errors.forbidden(f"read-only users may not change the secrets of project {pid}")
    return project


def may_write(request: web.Request, pid: str) -> bool:
    return roles.may_write_secrets(access(request).project_role(pid))


def check_type(body: dict[str, Any], schema: Schema) -> None:
    if body.get("type", schema.id) != schema.id:
        raise errors.invalid("type", f"type must be {schema.id}")


def created_spec(body: dict[str, Any]) -> tuple[str, SecretSpec]:
    """The name and content of a Secret to create."""
    name = secrets.check_name(body.get("name"))
    kind = secrets.check_kind(body.get("kind"))
    data = secrets.data_of(body, None) or {}
    secrets.check_data(kind, data)
    return name, SecretSpec(
        kind=kind,
        data=data,
        labels=user_labels(body.get("labels")),
        annotations=user_annotations(body.get("annotations")),
        description=secrets.check_description(body.get("description")),
    )


def updated_spec(
    body: dict[str, Any], current: Obj, name: str, namespace: str | None
) -> SecretSpec:
    """`current` with what the body gives replaced: data (with stringData written over it),
    labels, annotations, description; the rest kept. The kind cannot change (Kubernetes keeps
    a Secret's type), nor the `name` or the `namespaceId` shown."""
    kind = secrets.kind_of(current)
    if body.get("kind") not in (None, "", kind):
        raise Invalid(f"kind cannot change (it is {kind})", "kind", "InvalidAction")
    for field, value in (("name", name), ("namespaceId", namespace)):
        if body.get(field) not in (None, "", value):
            raise Invalid(f"{field} cannot change", field, "InvalidAction")
    data = secrets.data_of(body, current.get("data") or {})
    if data is not None:
        secrets.check_data(kind, data)
    return SecretSpec(
        kind=kind,
        data=data if data is not None else current.get("data") or {},
        labels=(
            user_labels(body["labels"]) if "labels" in body
            else secrets.shown_labels(current)
        ),
        annotations=(
            user_annotations(body["annotations"]) if "annotations" in body
            else secrets.shown_annotations(current)
        ),
        description=(
            secrets.check_description(body["description"]) if "description" in body
            else secrets.description_of(current)
        ),
    )  # fmt: skip


def replacement(current: Obj, spec: SecretSpec) -> dict[str, Any]:
    """The whole Secret that replaces `current`, on condition that it is still that version."""
    meta = current["metadata"]
    labels, annotations = secrets.kept_metadata(current)
    body = secrets.secret_body(meta["name"], meta["namespace"], spec, labels, annotations)
    body["metadata"]["resourceVersion"] = meta.get("resourceVersion")
    return body


def as_secret(manifest: dict[str, Any]) -> Secret:
    return Secret(
        metadata=ObjectMeta(**manifest["metadata"]), type=manifest["type"], data=manifest["data"]
    )


async def create(client: AsyncClient, manifest: dict[str, Any], taken: str) -> Obj:
    """Stores the Secret; 409 with the message `taken` when its name is taken."""
    try:
        return as_dict(await client.create(as_secret(manifest)))
    except KubeApiError as exc:
        if exc.status.code == 409:
            raise errors.conflict(taken) from None
        raise


def creator_annotation(request: web.Request) -> dict[str, str]:
    return {names.ANNOTATION_CREATOR: access(request).user_id}


def fields(obj: Obj, pid: str, secret_id: str, name: str, namespace: str | None) -> dict[str, Any]:
    """All of a resource's fields: none holds a value of its data."""
    meta = obj["metadata"]
    return {
        "id": secret_id,
        "name": name,
        "namespaceId": namespace,
        "projectId": pid,
        "kind": secrets.kind_of(obj),
        "keys": secrets.keys_of(obj),
        "labels": secrets.shown_labels(obj),
        "annotations": secrets.shown_annotations(obj),
        "description": secrets.description_of(obj),
        "creatorId": (meta.get("annotations") or {}).get(names.ANNOTATION_CREATOR, ""),
        "state": "removing" if meta.get("deletionTimestamp") else "active",
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def render(base: str, schema: Schema, body: dict[str, Any], collection_url: str) -> dict[str, Any]:
    rendered = envelope.resource(base, schema, body)
    url = f"{collection_url}/{body['id']}"
    project = f"{base}/v3/projects/{body['projectId']}"
    rendered["links"] = {"self": url, "update": url, "remove": url, "project": project}
    return rendered


def collection(
    request: web.Request,
    schema: Schema,
    pid: str,
    objs: list[Obj],
    id_of: Callable[[Obj], str],
    fields_of: Callable[[Obj], dict[str, Any]],
    render_one: Callable[[Obj], dict[str, Any]],
    collection_url: str,
) -> dict[str, Any]:
    """A project's secrets (of either schema) as a collection; creatable by its writers."""
    can_create = may_write(request, pid)
    body = envelope.collection(base_url(request), schema, objs, id_of, fields_of, render_one,
                               request.query, request.path, can_create=can_create)  # fmt: skip
    body["createTypes"] = {schema.id: collection_url} if can_create else {}
    return body
