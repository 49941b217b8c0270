"""`/v3/settings`: every user may read them; only admins change them."""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import settings as stored_settings
from corral.core import settings

SCHEMA = Schema(
    id="setting",
    plural="settings",
    fields={
        "name": readonly("string"),
        "value": Field(
            "string",
            update=True,
            required=True,
            description="Required; the empty string restores the default",
        ),
        "default": readonly("string"),
        "customized": readonly("boolean", "True when value overrides the default"),
        "description": readonly("string"),
    },
    resource_methods=("GET", "PUT"),
    collection_methods=("GET",),
)


def fields(ask: Ask, name: str) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    stored = ask.deps.stores.settings.get(name) or {}
    definition = settings.CATALOG.get(name)
    default = stored.get("default") or (definition.default if definition else "")
    value = stored.get("value", "")
    return {"id": name, "name": name, "value": value or default, "default": default,
            "customized": bool(value) and value != default,
            "description": definition.description if definition else ""}  # fmt: skip


async def update(ask: Ask, name: str, body: dict[str, Any]) -> str:
    await stored_settings.change(ask.deps, ask.who, name, body)
    return name


FAMILY = Family[str](
    schema=SCHEMA,
    listed=lambda ask: stored_settings.names(ask.deps),
    find=lambda ask, name: name if name in stored_settings.names(ask.deps) else None,
    fields=fields,
    ident=lambda name: name,
    before_update=lambda ask, name: stored_settings.may_change(ask.who),
    update=update,
)
routes = handlers.routes(FAMILY)
