"""`/v3/projects/{project_id}/secrets`: a project's secrets, which every namespace of the
project gets a copy of (issue 12).

A project secret is a Secret in `svc-system` of the management cluster, under a name derived
from its cluster, project and name, labelled with its cluster and project, its name in an
annotation (`corral.core.projects.secrets`); its id is `<project>:<name>`
(`p-xxxxx:db-password`), as Rancher names secrets in a project's namespace. The operator
copies it into the project's namespaces (`operator.downstream.projects`), except in the cluster
`local`, whose namespaces are the management cluster's own: there corral holds no Secret rights
outside `svc-system`, so a project of `local` has none. Reads go to the management cluster's
API on each request: no API server keeps secret data in memory between requests
(`services.projectsecrets`). What a response shows is in `services.secrets`: never the data.
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.schemas import Schema
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import projectsecrets
from corral.apiserver.services import secrets as shared
from corral.core.kube.informer import Obj
from corral.core.projects import secrets

SCHEMA = Schema(
    id=projectsecrets.TYPE,
    plural="secrets",
    fields=shared.schema_fields(namespaced=False),
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    parent="project",
)
SECRETS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:secrets)}"


def collection_url(ask: Ask) -> str:
    return f"{ask.base}/v3/projects/{ask.path['project']}/{SCHEMA.plural}"


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    pid = ask.path["project"]
    return shared.fields(obj, pid, projectsecrets.secret_id(obj), secrets.name_of(obj), None)


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: projectsecrets.visible(ask.deps, ask.who, ask.path["project"]),
    find=lambda ask, secret_id: projectsecrets.find(
        ask.deps, ask.who, ask.path["project"], secret_id, ask.writing
    ),
    fields=fields,
    ident=projectsecrets.secret_id,
    url=lambda ask, obj: f"{collection_url(ask)}/{projectsecrets.secret_id(obj)}",
    links=lambda ask, obj: {"project": f"{ask.base}/v3/projects/{ask.path['project']}"},
    may_create=lambda ask: shared.may_write(ask.who, ask.path["project"]),
    create_url=collection_url,
    before_create=lambda ask: shared.writable_project(ask.deps, ask.who, ask.path["project"]),
    create=lambda ask, body: projectsecrets.create(ask.deps, ask.who, ask.path["project"], body),
    update=lambda ask, obj, body: projectsecrets.update(ask.deps, obj, body),
    delete=lambda ask, obj: projectsecrets.delete(ask.deps, obj),
    collection=SECRETS,
    within=lambda ask: f"project {ask.path['project']}",
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)
