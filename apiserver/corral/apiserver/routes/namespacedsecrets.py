"""`/v3/projects/{project_id}/namespacedSecrets`: Secrets in one namespace of a project, kept
in the downstream cluster itself (issue 12). The id is `<namespace>:<name>`.

Every Secret of a type a team writes in the project's namespaces is one, whoever made it
(kubectl too), except corral's copies of project secrets (`/secrets` shows those) and what the
cluster or Helm keep there for themselves (service account and bootstrap tokens, Helm
releases). Membership comes from the API server's watch of the cluster's namespaces; the
Secrets themselves are read from the cluster on each request, one listing per namespace of
the project (a few at a time), so no API server holds a cluster's secrets in memory
(`services.namespacedsecrets`).
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.schemas import Schema
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import namespacedsecrets
from corral.apiserver.services import secrets as shared
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj

SCHEMA = Schema(
    id=namespacedsecrets.TYPE,
    plural="namespacedSecrets",
    fields=shared.schema_fields(namespaced=True),
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    parent="project",
)
SECRETS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:namespacedSecrets)}"


def secret_id(obj: Obj) -> str:
    return str(ScopedId.of(obj))


def collection_url(ask: Ask) -> str:
    return f"{ask.base}/v3/projects/{ask.path['project']}/{SCHEMA.plural}"


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    meta = obj["metadata"]
    return shared.fields(obj, ask.path["project"], secret_id(obj), meta["name"], meta["namespace"])


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: namespacedsecrets.visible(
        ask.deps, ask.who, ask.path["project"], ask.query.get("namespaceId")
    ),
    find=lambda ask, wanted: namespacedsecrets.find(
        ask.deps, ask.who, ask.path["project"], wanted, ask.writing
    ),
    fields=fields,
    ident=secret_id,
    url=lambda ask, obj: f"{collection_url(ask)}/{secret_id(obj)}",
    links=lambda ask, obj: {"project": f"{ask.base}/v3/projects/{ask.path['project']}"},
    may_create=lambda ask: shared.may_write(ask.who, ask.path["project"]),
    create_url=collection_url,
    before_create=lambda ask: shared.writable_project(ask.deps, ask.who, ask.path["project"]),
    create=lambda ask, body: namespacedsecrets.create(ask.deps, ask.who, ask.path["project"], body),
    update=lambda ask, obj, body: namespacedsecrets.update(
        ask.deps, ask.who, ask.path["project"], obj, body
    ),
    delete=lambda ask, obj: namespacedsecrets.delete(ask.deps, ask.who, ask.path["project"], obj),
    collection=SECRETS,
    noun="secret",
    within=lambda ask: f"project {ask.path['project']}",
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)
