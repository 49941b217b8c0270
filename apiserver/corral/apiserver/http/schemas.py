"""Schemas: what each /v3 type looks like, what may be written, and how it is filtered.

One Schema per type drives three things: the `/v3/schemas` documents schema-driven clients
read, which body fields a create or update may set, and which fields collections can be
filtered and sorted by. A body field the schema does not have at all is refused (422 naming
it); one it has that the operation may not set (`id`, `state`, a create-only field on an
update) is what a client sends back of what it read, and is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from corral.core import errors

FILTERABLE = {"string", "enum", "int", "boolean", "date", "dnsLabel", "reference"}


@dataclass(frozen=True)
class Field:
    type: str
    create: bool = False
    update: bool = False
    required: bool = False
    write_only: bool = False
    default: Any = None
    options: tuple[str, ...] = ()
    description: str = ""
    # Deprecated values of an enum (spec 9), each with why and what to use instead.
    deprecated_options: dict[str, str] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"type": self.type, "create": self.create, "update": self.update,
                               "nullable": not self.required}  # fmt: skip
        if self.required:
            doc["required"] = True
        if self.write_only:
            doc["writeOnly"] = True
        if self.default is not None:
            doc["default"] = self.default
        if self.options:
            doc["options"] = list(self.options)
        if self.description:
            doc["description"] = self.description
        if self.deprecated_options:
            doc["deprecatedOptions"] = dict(self.deprecated_options)
        return doc

    @property
    def filterable(self) -> bool:
        return self.type.split("[")[0] in FILTERABLE


def readonly(kind: str, description: str = "") -> Field:
    return Field(kind, description=description)


# Fields every resource carries, read-only.
COMMON = {
    "id": readonly("string"),
    "type": readonly("string"),
    "created": readonly("date"),
    "uuid": readonly("string"),
}
# What every resource shows besides its schema's fields: the envelope, the state of those that
# have one, and the creator Rancher's clients read. A client may PUT back what it read: these
# are ignored wherever a body is a resource's.
SHOWN = frozenset(
    {"id", "type", "baseType", "links", "actions", "created", "createdTS", "creatorId", "uuid",
     "state", "transitioning", "transitioningMessage"}
)  # fmt: skip


@dataclass(frozen=True)
class Schema:
    id: str
    plural: str
    fields: dict[str, Field]
    resource_methods: tuple[str, ...] = ("GET",)
    collection_methods: tuple[str, ...] = ("GET",)
    resource_actions: dict[str, dict[str, str]] = field(default_factory=dict)
    collection_actions: dict[str, dict[str, str]] = field(default_factory=dict)
    embedded: bool = False  # an action input or output type, not a collection
    # A type whose collections exist only under one of this type (nodes under a cluster):
    # it has no top-level collection to link to.
    parent: str | None = None

    @property
    def all_fields(self) -> dict[str, Field]:
        return {**({} if self.embedded else COMMON), **self.fields}

    def filters(self) -> list[str]:
        return sorted(n for n, f in self.all_fields.items() if f.filterable and not f.write_only)

    def refuse_unknown(
        self, body: dict[str, Any], also: Callable[[str], bool] | None = None
    ) -> None:
        """Refuses (422 naming it) the first key of `body` that is none of the schema's fields,
        nor shown by every resource, nor one `also` takes (keys named by what the body says,
        as a template's `<driver>Config`). An action's input has only its own fields."""
        for key in body:
            if key in self.all_fields or (not self.embedded and key in SHOWN):
                continue
            if also is None or not also(key):
                raise errors.unknown(key, self.id)

    def writable(self, body: dict[str, Any], creating: bool) -> dict[str, Any]:
        """The body's fields this operation may set; the others it has are ignored."""
        allowed = {n for n, f in self.fields.items() if (f.create if creating else f.update)}
        return {k: v for k, v in body.items() if k in allowed}

    def document(self, base: str) -> dict[str, Any]:
        links = {"self": f"{base}/v3/schemas/{self.id}"}
        if "GET" in self.collection_methods and not self.embedded and self.parent is None:
            links["collection"] = f"{base}/v3/{self.plural.lower()}"
        doc: dict[str, Any] = {
            "id": self.id,
            "type": "schema",
            "baseType": "schema",
            "links": links,
            "pluralName": self.plural,
            "version": {"group": "management.svc.io", "path": "/v3", "version": "v3"},
            "resourceFields": {n: f.document() for n, f in self.all_fields.items()},
            "resourceMethods": [] if self.embedded else list(self.resource_methods),
            "collectionMethods": [] if self.embedded else list(self.collection_methods),
        }
        if self.resource_actions:
            doc["resourceActions"] = self.resource_actions
        if self.collection_actions:
            doc["collectionActions"] = self.collection_actions
        if self.parent is not None:
            doc["parent"] = self.parent
        if not self.embedded:
            doc["collectionFilters"] = {
                n: {"modifiers": ["eq", "ne", "in", "notin"]} for n in self.filters()
            }
        return doc


class Registry:
    """Every schema the server knows, by id and by plural name (case-insensitive)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Schema] = {}

    def add(self, *schemas: Schema) -> None:
        for schema in schemas:
            self._by_id[schema.id] = schema

    def get(self, name: str) -> Schema | None:
        lowered = name.lower()
        for schema in self._by_id.values():
            if lowered in (schema.id.lower(), schema.plural.lower()):
                return schema
        return None

    def all(self) -> list[Schema]:
        return sorted(self._by_id.values(), key=lambda s: s.id)

    def collections(self) -> list[Schema]:
        return [
            s
            for s in self.all()
            if not s.embedded and s.parent is None and "GET" in s.collection_methods
        ]
