"""A `/v3` family described once: where its objects are, who sees them, what a resource shows,
and the services that create, change and remove one.

The generic handlers (`handlers.py`) serve every family's list, get, create, update and delete
from its `Family`; a family's module holds only what is its own: its schema, its fields and
the calls into its services. Actions and sub-resources stay routes of the family's module.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from multidict import MultiMapping

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http import encoding, envelope
from corral.apiserver.http.body import DEFAULT_LIMIT
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.schemas import Schema
from corral.apiserver.http.urls import v3
from corral.core import errors
from corral.core.kube.informer import Obj

T = TypeVar("T")
V = TypeVar("V")
# What a family's lookups give: at once from a cache of the management cluster, or awaited
# from a downstream cluster's (started on first use) or from the cluster itself.
Maybe: TypeAlias = V | Awaitable[V]
# A resource's state as Rancher's clients read it: state, transitioning (yes, no, error) and
# transitioningMessage.
State = tuple[str, str, str]
# The methods and actions a caller is offered, by what `Family.offers_alike` gives.
Offers = dict[Hashable, tuple[list[str], list[str]]]


class Ask(NamedTuple):
    """One request as a family sees it: who asks, with what the application holds, where
    links start, the path's parameters (a nested family's parent), the query, when it is
    answered, and whether it writes. A named tuple, as each request makes one: a frozen
    dataclass took four times as long to make."""

    deps: Deps
    who: Caller
    base: str
    path: Mapping[str, str]
    query: MultiMapping[str]
    # One instant for every resource of an answer (whether each token of a page has expired):
    # the time is read once per request, not once per resource.
    now: datetime.datetime
    # Whether the request changes something: a family whose parent is checked for writing
    # before the resource is looked for (403 before 404) asks.
    writing: bool = False


def _by_name(obj: Obj) -> str:
    name: str = obj["metadata"]["name"]
    return name


@dataclass(frozen=True)
class Family(Generic[T]):
    schema: Schema
    # What a collection holds for this caller (before filters and paging), and one resource by
    # id; None when it does not exist or the caller may not see it: both are 404. A nested
    # family's lookups raise the parent's own 404 (a cluster the caller cannot see).
    listed: Callable[[Ask], Maybe[Iterable[T]]]
    find: Callable[[Ask, str], Maybe[T | None]]
    # The resource's filterable and sortable fields, exactly as it shows them.
    fields: Callable[[Ask, T], dict[str, Any]]
    ident: Callable[[T], str] = _by_name  # type: ignore[assignment]
    state: Callable[[T], State] | None = None
    # What a resource shows besides its fields: neither filtered nor sorted by.
    detail: Callable[[Ask, T], dict[str, Any]] | None = None
    links: Callable[[Ask, T], dict[str, str]] | None = None
    # The actions that apply to the resource (to its kind, its state); it shows those of them
    # that `before_action` lets this caller take.
    actions: Callable[[Ask, T], Iterable[str]] | None = None
    # Where a resource of a nested family is (its self, update, remove and action links).
    url: Callable[[Ask, T], str] | None = None
    # What a GET of one resource adds when its query asks (`?include=`): costly, so never in
    # a collection.
    include: Callable[[Ask, T], Awaitable[dict[str, Any]]] | None = None
    # Whether a collection offers a create (`createTypes`) when that reads more than
    # `before_create` can (the query's project); `before_create` decides otherwise.
    may_create: Callable[[Ask], bool] | None = None
    # Where a collection's `createTypes` sends a client, when not to `/v3/<plural>`.
    create_url: Callable[[Ask], str] | None = None
    # The checks of a write that need no body: each raises the core error that refuses it
    # (403 for what the caller may not do, 422 for what cannot be done to this resource), so
    # a write is refused before its body is read. They are the one rule of both the write and
    # what a resource offers its caller: `createTypes`, the `update` and `remove` links and
    # the actions are shown only where these checks let the caller through. Cheap and
    # synchronous, as a page of a thousand resources asks each of them.
    before_create: Callable[[Ask], object] | None = None
    before_update: Callable[[Ask, T], object] | None = None
    before_delete: Callable[[Ask, T], object] | None = None
    before_action: Callable[[Ask, T, str], object] | None = None
    create: Callable[[Ask, dict[str, Any]], Awaitable[T]] | None = None
    update: Callable[[Ask, T, dict[str, Any]], Awaitable[T]] | None = None
    delete: Callable[[Ask, T], Awaitable[None]] | None = None
    # The route of the collection, for a family nested under another (a cluster's nodes);
    # `/v3/<plural>` otherwise.
    collection: str = ""
    noun: str = ""  # what a 404 calls one resource; the schema's id by default
    # The whole 404 message, for a family whose answer must not echo the id it was asked.
    missing: str = ""
    # Where a nested family's resource was looked for, as a 404 says it (`project c-1:p-1`).
    within: Callable[[Ask], str] | None = None
    body_limit: int = DEFAULT_LIMIT
    update_limit: int | None = None  # a PUT's body limit when it is not `body_limit`
    # Give create and update the body as sent, not only the schema's writable fields: for
    # families that check `type`, aliases and the fields that cannot change themselves (a
    # fixed field given is 422 naming it, never dropped), and those whose fields are named by
    # what the body says (a driver's `<driver>Config`).
    body_as_sent: bool = False
    # Body keys the family reads besides its schema's fields, named by what the body says (a
    # template's `<driver>Config`): every other key the schema lacks is refused.
    named_fields: Callable[[str], bool] | None = None
    default_sort: str = "id"
    newest_first: bool = False
    # The key under which a resource renders the same for every request but for the fields
    # `varying` gives (its name and resourceVersion): it is rendered once per key and kept
    # (`Deps.renderings`), and encoded once per key and values of `varying` (hashable, few:
    # a boolean or two). None renders it every time: an answer that shows a secret.
    rendering_key: Callable[[Ask, T], Hashable | None] | None = None
    varying: Callable[[Ask, T], dict[str, Any]] | None = None
    # What the caller is offered of a resource (its methods and actions) is the same for the
    # resources of one request with the same value of this (a workload's kind): a page asks
    # the checks once per value, not once per resource. None asks them of each.
    offers_alike: Callable[[T], Hashable] | None = None

    @property
    def collection_route(self) -> str:
        return self.collection or v3(self.schema.plural)

    def not_found(self, ask: Ask, resource_id: str) -> str:
        if self.missing:
            return self.missing
        missing = f"{self.noun or self.schema.id} {resource_id} not found"
        return f"{missing} in {self.within(ask)}" if self.within else missing

    async def found(self, ask: Ask, resource_id: str) -> T:
        """The resource `resource_id` names; 404 when it is missing or the caller may not
        see it (or when `find` refuses the parent it is looked for in)."""
        obj = await settled(self.find(ask, resource_id))
        if obj is None:
            raise errors.not_found(self.not_found(ask, resource_id))
        return obj

    def given(self, body: dict[str, Any], creating: bool) -> dict[str, Any]:
        """What of a request's body a create or an update is given: a key the family does not
        know is refused (422 naming it), never dropped."""
        self.schema.refuse_unknown(body, self.named_fields)
        return body if self.body_as_sent else self.schema.writable(body, creating)

    def all_fields(self, ask: Ask, obj: T) -> dict[str, Any]:
        shown = self.fields(ask, obj)
        if self.state is not None:
            current, transitioning, message = self.state(obj)
            shown |= {"state": current, "transitioning": transitioning,
                      "transitioningMessage": message}  # fmt: skip
        return shown

    def offered_methods(self, ask: Ask, obj: T) -> list[str]:
        """The schema's methods on a resource that its checks let this caller use."""
        checks: dict[str, Callable[[Ask, T], object] | None] = {
            "PUT": self.before_update,
            "DELETE": self.before_delete,
        }
        return [
            method
            for method in self.schema.resource_methods
            if (check := checks.get(method)) is None or allows(check, ask, obj)
        ]

    def offered_actions(self, ask: Ask, obj: T) -> list[str]:
        """The actions that apply to a resource and that this caller may take."""
        if self.actions is None:
            return []
        check = self.before_action
        return [
            name
            for name in self.actions(ask, obj)
            if check is None or allows(check, ask, obj, name)
        ]

    def creatable(self, ask: Ask) -> bool:
        if "POST" not in self.schema.collection_methods:
            return False
        if self.may_create is not None:
            return self.may_create(ask)
        check = self.before_create
        return check is None or allows(check, ask)

    def render(self, ask: Ask, obj: T, alike: Offers | None = None) -> dict[str, Any]:
        """The resource as an answer shows it: a new dict the caller may change. `alike`
        holds what the caller is offered of resources alike (`offers_alike`), for a page."""
        methods, actions = self._offered(ask, obj, alike)
        key = self._kept_key(ask, obj, methods, actions)
        if key is None:
            return self._render(ask, obj, methods, actions)
        kept = ask.deps.renderings.get(
            self.schema.id, key, lambda: self._render(ask, obj, methods, actions)
        )
        return {**kept, **self._varying(ask, obj)}

    def encoded(self, ask: Ask, obj: T, alike: Offers | None = None) -> bytes:
        """`render`'s answer as JSON. A resource with a rendering key is encoded once per key
        and values of `varying` (its object's version, which token asks, whether it has
        expired), not once per request. Only what varies keeps the rendering itself too:
        laying each new value over it costs less than rendering again."""
        methods, actions = self._offered(ask, obj, alike)
        key = self._kept_key(ask, obj, methods, actions)
        if key is None:
            return encoding.encode(self._render(ask, obj, methods, actions))
        if self.varying is None:
            return ask.deps.renderings.get(
                self.schema.id,
                (key, ()),
                lambda: encoding.encode(self._render(ask, obj, methods, actions)),
            )
        varying = self._varying(ask, obj)

        def encode() -> bytes:
            kept = ask.deps.renderings.get(
                self.schema.id, key, lambda: self._render(ask, obj, methods, actions)
            )
            return encoding.encode({**kept, **varying})

        return ask.deps.renderings.get(self.schema.id, (key, tuple(varying.items())), encode)

    def _offered(self, ask: Ask, obj: T, alike: Offers | None) -> tuple[list[str], list[str]]:
        if alike is None or self.offers_alike is None:
            return self.offered_methods(ask, obj), self.offered_actions(ask, obj)
        which = self.offers_alike(obj)
        found = alike.get(which)
        if found is None:
            found = alike[which] = (self.offered_methods(ask, obj), self.offered_actions(ask, obj))
        return found

    def _kept_key(
        self, ask: Ask, obj: T, methods: list[str], actions: list[str]
    ) -> Hashable | None:
        """What a kept rendering is kept under. What this caller is offered is part of it: one
        kept rendering never shows one caller's links to another."""
        key = self.rendering_key(ask, obj) if self.rendering_key is not None else None
        if key is None:
            return None
        return (ask.base, key, tuple(methods), tuple(actions))

    def _varying(self, ask: Ask, obj: T) -> dict[str, Any]:
        return self.varying(ask, obj) if self.varying is not None else {}

    def _render(self, ask: Ask, obj: T, methods: list[str], actions: list[str]) -> dict[str, Any]:
        body = self.all_fields(ask, obj)
        if self.detail is not None:
            body |= self.detail(ask, obj)
        return envelope.resource(
            ask.base,
            self.schema,
            body,
            actions=actions,
            links=self.links(ask, obj) if self.links else None,
            url=self.url(ask, obj) if self.url else None,
            methods=methods,
        )

    async def page(self, ask: Ask, path: str) -> dict[str, Any]:
        """The collection for this caller: filtered, sorted and paged by the query. A family
        with a rendering key shows each resource as its kept encoding (`encoded`), so a page
        looked up again encodes only its envelope."""
        alike: Offers = {}
        shown: Callable[[T], Any] = (
            (lambda obj: encoding.fragment(self.encoded(ask, obj, alike)))
            if self.rendering_key is not None
            else (lambda obj: self.render(ask, obj, alike))
        )
        return envelope.collection(
            ask.base,
            self.schema,
            await settled(self.listed(ask)),
            self.ident,
            lambda obj: self.all_fields(ask, obj),
            shown,
            ask.query,
            path,
            can_create=self.creatable(ask),
            default_sort=self.default_sort,
            newest_first=self.newest_first,
            create_url=self.create_url(ask) if self.create_url else None,
        )


def allows(check: Callable[..., object], *args: Any) -> bool:
    """Whether a write's check lets the caller through: what it would refuse is not offered."""
    try:
        check(*args)
    except (errors.CorralError, ApiError):
        return False
    return True


async def settled(value: Maybe[V]) -> V:
    # What is awaited here is a coroutine (or a future): `__await__` tells it from a value
    # without `inspect.isawaitable`'s abstract-class check of every value that is not.
    if hasattr(value, "__await__"):
        return await value
    return value
