"""The one shape of a project's two secret families, `/v3/projects/{id}/secrets` (kept in the
management cluster, copied into every namespace of the project) and
`/v3/projects/{id}/namespacedSecrets` (kept in one namespace downstream): the same fields,
links and rules of who writes, over a service of each (`services.projectsecrets`,
`services.namespacedsecrets`).

Every role in the project reads its secrets; a write checks the project for writing before
the secret is looked for (403 for read-only members, whether it exists or not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.schemas import Schema
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import secrets as shared
from corral.core.kube.informer import Obj


class Secrets(Protocol):
    """What a secret family's service offers."""

    TYPE: str

    def secret_id(self, obj: Obj) -> str: ...

    def placed(self, obj: Obj) -> tuple[str, str | None]: ...

    async def visible(
        self, deps: Deps, who: Caller, pid: str, query: Mapping[str, str]
    ) -> list[Obj]: ...

    async def find(
        self, deps: Deps, who: Caller, pid: str, wanted: str, writing: bool
    ) -> Obj | None: ...

    async def create(self, deps: Deps, who: Caller, pid: str, body: dict[str, Any]) -> Obj: ...

    async def update(
        self, deps: Deps, who: Caller, pid: str, current: Obj, body: dict[str, Any]
    ) -> Obj: ...

    async def delete(self, deps: Deps, who: Caller, pid: str, obj: Obj) -> None: ...


def family(service: Secrets, plural: str, namespaced: bool) -> Family[Obj]:
    schema = Schema(
        id=service.TYPE,
        plural=plural,
        fields=shared.schema_fields(namespaced),
        resource_methods=("GET", "PUT", "DELETE"),
        collection_methods=("GET", "POST"),
        parent="project",
    )

    def project(ask: Ask) -> str:
        return ask.path["project"]

    def collection_url(ask: Ask) -> str:
        return f"{ask.base}/v3/projects/{project(ask)}/{plural}"

    def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
        return shared.fields(obj, project(ask), service.secret_id(obj), *service.placed(obj))

    return Family[Obj](
        schema=schema,
        listed=lambda ask: service.visible(ask.deps, ask.who, project(ask), ask.query),
        find=lambda ask, wanted: service.find(ask.deps, ask.who, project(ask), wanted, ask.writing),
        fields=fields,
        ident=service.secret_id,
        url=lambda ask, obj: f"{collection_url(ask)}/{service.secret_id(obj)}",
        links=lambda ask, obj: {"project": f"{ask.base}/v3/projects/{project(ask)}"},
        create_url=collection_url,
        # Read-only members see names and keys, and may change none of them.
        before_create=lambda ask: shared.writable_project(ask.deps, ask.who, project(ask)),
        before_update=lambda ask, obj: shared.writable_project(ask.deps, ask.who, project(ask)),
        before_delete=lambda ask, obj: shared.writable_project(ask.deps, ask.who, project(ask)),
        create=lambda ask, body: service.create(ask.deps, ask.who, project(ask), body),
        update=lambda ask, obj, body: service.update(ask.deps, ask.who, project(ask), obj, body),
        delete=lambda ask, obj: service.delete(ask.deps, ask.who, project(ask), obj),
        collection=f"/v3/{{projects:(?i:projects)}}/{{project}}/{{type:(?i:{plural})}}",
        noun="secret",
        within=lambda ask: f"project {project(ask)}",
        body_as_sent=True,
    )
