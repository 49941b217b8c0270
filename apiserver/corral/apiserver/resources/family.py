"""A `/v3` family described once: where its objects are, who sees them, what a resource shows,
and the services that create, change and remove one.

The generic handlers (`handlers.py`) serve every family's list, get, create, update and delete
from its `Family`; a family's module holds only what is its own: its schema, its fields and
the calls into its services. Actions and sub-resources stay routes of the family's module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from multidict import MultiMapping

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import DEFAULT_LIMIT
from corral.apiserver.http.schemas import Schema
from corral.apiserver.http.urls import v3
from corral.core.kube.informer import Obj

T = TypeVar("T")
# A resource's state as Rancher's clients read it: state, transitioning (yes, no, error) and
# transitioningMessage.
State = tuple[str, str, str]


@dataclass(frozen=True)
class Ask:
    """One request as a family sees it: who asks, with what the application holds, where
    links start, the path's parameters (a nested family's parent) and the query."""

    deps: Deps
    who: Caller
    base: str
    path: Mapping[str, str]
    query: MultiMapping[str]


def _by_name(obj: Obj) -> str:
    name: str = obj["metadata"]["name"]
    return name


@dataclass(frozen=True)
class Family(Generic[T]):
    schema: Schema
    # What a collection holds for this caller (before filters and paging), and one resource by
    # id; None when it does not exist or the caller may not see it: both are 404.
    listed: Callable[[Ask], Iterable[T]]
    find: Callable[[Ask, str], T | None]
    # The resource's filterable and sortable fields, exactly as it shows them.
    fields: Callable[[Ask, T], dict[str, Any]]
    ident: Callable[[T], str] = _by_name  # type: ignore[assignment]
    state: Callable[[T], State] | None = None
    # What a resource shows besides its fields: neither filtered nor sorted by.
    detail: Callable[[Ask, T], dict[str, Any]] | None = None
    links: Callable[[Ask, T], dict[str, str]] | None = None
    actions: Callable[[Ask, T], Iterable[str]] | None = None
    may_create: Callable[[Ask], bool] = lambda ask: True
    # Refuse (403) what the caller may not do before their body is even read, as a check
    # inside `create` or `update` could only after.
    before_create: Callable[[Ask], None] | None = None
    before_update: Callable[[Ask, T], None] | None = None
    create: Callable[[Ask, dict[str, Any]], Awaitable[T]] | None = None
    update: Callable[[Ask, T, dict[str, Any]], Awaitable[T]] | None = None
    delete: Callable[[Ask, T], Awaitable[None]] | None = None
    # The route of the collection, for a family nested under another (a cluster's nodes);
    # `/v3/<plural>` otherwise.
    collection: str = ""
    # A nested family's resource URL (its collection's, then the object's name); the id under
    # `/v3/<plural>` otherwise.
    url: Callable[[Ask, T], str] | None = None
    # Whether the resource may be removed now (the local cluster may not): without its
    # `remove` link otherwise.
    removable: Callable[[T], bool] | None = None
    # Create and update get the whole body, not only the schema's writable fields: for a family
    # whose services refuse a fixed field given (422 naming it) rather than drop it.
    whole_body: bool = False
    noun: str = ""  # what a 404 calls one resource; the schema's id by default
    body_limit: int = DEFAULT_LIMIT
    default_sort: str = "id"
    newest_first: bool = False

    @property
    def collection_route(self) -> str:
        return self.collection or v3(self.schema.plural)

    def not_found(self, resource_id: str) -> str:
        return f"{self.noun or self.schema.id} {resource_id} not found"

    def all_fields(self, ask: Ask, obj: T) -> dict[str, Any]:
        shown = self.fields(ask, obj)
        if self.state is not None:
            current, transitioning, message = self.state(obj)
            shown |= {"state": current, "transitioning": transitioning,
                      "transitioningMessage": message}  # fmt: skip
        return shown

    def render(self, ask: Ask, obj: T) -> dict[str, Any]:
        body = self.all_fields(ask, obj)
        if self.detail is not None:
            body |= self.detail(ask, obj)
        rendered = envelope.resource(
            ask.base,
            self.schema,
            body,
            actions=self.actions(ask, obj) if self.actions else (),
            links=self.links(ask, obj) if self.links else None,
            url=self.url(ask, obj) if self.url else None,
        )
        if self.removable is not None and not self.removable(obj):
            rendered["links"].pop("remove", None)
        return rendered

    def given(self, body: dict[str, Any], creating: bool) -> dict[str, Any]:
        """What create or update is given of a request's body."""
        return body if self.whole_body else self.schema.writable(body, creating)

    def page(self, ask: Ask, path: str) -> dict[str, Any]:
        """The collection for this caller: filtered, sorted and paged by the query."""
        return envelope.collection(
            ask.base,
            self.schema,
            self.listed(ask),
            self.ident,
            lambda obj: self.all_fields(ask, obj),
            lambda obj: self.render(ask, obj),
            ask.query,
            path,
            can_create="POST" in self.schema.collection_methods and self.may_create(ask),
            default_sort=self.default_sort,
            newest_first=self.newest_first,
        )
