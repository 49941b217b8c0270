"""The wire envelope: resources and collections the way Rancher-style (norman) clients read them.

A resource carries `id`, `type`, `baseType`, `links` (`self`, plus `update`/`remove` when those
methods exist) and `actions`. A collection carries `type: collection`, `resourceType`, `data`,
`links`, `actions`, `createTypes`, `pagination`, `sort` and `filters`; filtering (`field`,
`field_ne`, `field_in`, `field_notin`), sorting and paging follow norman's rules.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from multidict import MultiMapping

from corral.apiserver.http.rows import Row, Rows, row_id, text
from corral.apiserver.http.schemas import Schema

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10000
MODIFIERS = ("ne", "in", "notin")

T = TypeVar("T")
R = TypeVar("R")
# A filter of a query: the field, its modifier (`eq`, `ne`, `in`, `notin`) and its values.
Condition = tuple[str, str, list[str]]


@dataclass(frozen=True)
class Listing(Generic[T, R]):
    """A collection whose objects are made only when a page shows them, so that a page of a
    long listing costs the page: its rows are in id order, each with the fields `known`
    without making the object, and what `make` makes the object from. An `eq` filter and a
    sort on a known field read the views the rows keep (`Rows`). `fuller` gives the same
    rows knowing the fields `fuller_known` too (fields that change with the object, which
    the rows outlive: whoever keeps them makes them again when one did), asked only when a
    query filters or sorts by one of those. A filter or a sort on any other field makes
    every object."""

    rows: Rows[R]
    known: frozenset[str]
    make: Callable[[R], T]
    fuller: Callable[[], Rows[R]] | None = None
    fuller_known: frozenset[str] = frozenset()

    def __iter__(self) -> Iterator[T]:
        return (self.make(source) for _, _, source in self.rows)


def resource_url(base: str, schema: Schema, resource_id: str) -> str:
    return f"{base}/v3/{schema.plural}/{resource_id}"


def resource(
    base: str,
    schema: Schema,
    body: dict[str, Any],
    actions: Iterable[str] = (),
    links: Mapping[str, str] | None = None,
    url: str | None = None,
    methods: Collection[str] | None = None,
) -> dict[str, Any]:
    """Decorate a resource body (which carries `id`) with type, links and actions.

    `url` is where the resource is when not at `/v3/<plural>/<id>` (a nested family's);
    `methods` those of the schema's that this caller may use on it, when not all."""
    url = url or resource_url(base, schema, body["id"])
    offered = [m for m in schema.resource_methods if methods is None or m in methods]
    all_links = {"self": url}
    if "PUT" in offered:
        all_links["update"] = url
    if "DELETE" in offered:
        all_links["remove"] = url
    all_links.update(links or {})
    return {
        **body,
        "type": schema.id,
        "baseType": schema.id,
        "links": all_links,
        "actions": {name: f"{url}?action={name}" for name in actions},
    }


def collection(
    base: str,
    schema: Schema,
    objects: Iterable[T],
    ident: Callable[[T], str],
    fields: Callable[[T], Mapping[str, Any]],
    render: Callable[[T], Any],
    query: MultiMapping[str],
    path: str,
    can_create: bool,
    default_sort: str = "id",
    newest_first: bool = False,
    create_url: str | None = None,
) -> dict[str, Any]:
    """Filter, sort and page objects into a collection, rendering only the page: a page of a
    long listing costs the page, not the listing (and a `Listing`'s page makes only the
    page's objects). Objects whose sort field is equal stay in id order.

    `ident` gives an object's `id` and `fields` its filterable values, exactly as `render`
    shows them (a resource's dict, or its JSON as `encoding.fragment` carries it). Without
    `sort` and `order` in the query, items sort by `default_sort`, descending when
    `newest_first`. `create_url` is where to create one, when not at `/v3/<plural>`."""
    self_url = f"{base}{path}"
    filterable = schema.filters()
    conditions = _conditions(query, filterable)
    sort_field = query.get("sort", default_sort)
    if sort_field not in filterable:
        sort_field = default_sort
    descending = query.get("order", "desc" if newest_first else "asc") == "desc"

    asked = {name for name, _, _ in conditions} | {sort_field}
    rows: Sequence[Row[Any]]
    show: Callable[[Any], T]
    checks = conditions  # what each row is checked against
    in_order = False  # whether the rows are in the order asked already
    listing = objects if isinstance(objects, Listing) else None
    by_rows: tuple[Rows[Any], frozenset[str]] | None = None
    if listing is not None and asked <= listing.known | {"id", "type"}:
        by_rows = listing.rows, listing.known
    elif (
        listing is not None
        and listing.fuller is not None
        and asked <= listing.fuller_known | {"id", "type"}
    ):
        by_rows = listing.fuller(), listing.fuller_known
    if listing is not None and by_rows is not None:
        rows, checks, in_order = _viewed(*by_rows, conditions, sort_field, descending)
        show = listing.make
    else:
        # An object's fields cost several times its id: most pages are neither filtered nor
        # sorted by anything else, and read none.
        wanted = bool(conditions) or sort_field != "id"
        made = [(ident(obj), fields(obj) if wanted else {}, obj) for obj in objects]
        # Ties of another sort field in id order: the same order page after page.
        made.sort(key=row_id)
        rows, show = made, _itself
    matching = [row for row in rows if _matches(row, checks, schema)] if checks else rows
    if not in_order and sort_field != "id":
        matching = sorted(matching, key=lambda row: _value(row, sort_field, schema),
                          reverse=descending)  # fmt: skip
    elif not in_order and descending:
        matching = matching[::-1]

    limit = _limit(query.get("limit"))
    marker = query.get("marker")
    start = _position(matching, marker, by_id=sort_field == "id" and not descending)
    page = [render(show(source)) for _, _, source in matching[start : start + limit]]

    def page_url(marker_id: str) -> str:
        params = [(k, v) for k, v in query.items() if k != "marker"] + [("marker", marker_id)]
        return f"{self_url}?{urlencode(params)}"

    pagination: dict[str, Any] = {"limit": limit, "total": len(matching)}
    if start > 0 or start + limit < len(matching):
        pagination |= {"partial": True, "first": page_url(matching[0][0])}
        if start + limit < len(matching):
            pagination["next"] = page_url(matching[start + limit][0])
        if start > 0:
            pagination["previous"] = page_url(matching[max(start - limit, 0)][0])
        if len(matching) - limit >= 0:
            pagination["last"] = page_url(matching[len(matching) - limit][0])
        if marker:
            pagination["marker"] = page_url(marker)

    flipped = [(k, v) for k, v in query.items() if k not in ("order", "marker")]
    flipped.append(("order", "asc" if descending else "desc"))
    sort: dict[str, Any] = {
        "order": "desc" if descending else "asc",
        "reverse": f"{self_url}?{urlencode(flipped)}",
        "links": {name: f"{self_url}?sort={name}" for name in filterable},
    }
    if "sort" in query:
        sort["name"] = sort_field

    filters: dict[str, Any] = {name: None for name in filterable}
    for name, modifier, values in conditions:
        entry = {
            "modifier": modifier,
            "value": values if modifier in ("in", "notin") else values[0],
        }
        filters[name] = [*(filters[name] or []), entry]

    return {
        "type": "collection",
        "resourceType": schema.id,
        "links": {"self": self_url},
        "createTypes": (
            {schema.id: create_url or f"{base}/v3/{schema.plural.lower()}"} if can_create else {}
        ),
        "actions": {},
        "pagination": pagination,
        "sort": sort,
        "filters": filters,
        "data": page,
    }


def _viewed(
    listed: Rows[Any],
    known: frozenset[str],
    conditions: list[Condition],
    sort_field: str,
    descending: bool,
) -> tuple[Sequence[Row[Any]], list[Condition], bool]:
    """A listing's rows (which know the fields `known`) narrowed by the query's first `eq`
    filter on one of those, and in the order asked when it sorts by one (or `id`), from the
    views the rows keep; the conditions left to check; whether the rows are in the order
    asked. Filtering keeps rows in their order, and equal sort values stay in id order either
    way, so the page is the one filtering then sorting every row would give."""
    # `type` is the schema's, shown on every resource, not a row's; an `id` filter is of one.
    viewable = known - {"id", "type"}
    where = next(((name, values[0]) for name, modifier, values in conditions
                  if modifier == "eq" and name in viewable), None)  # fmt: skip
    left = [c for c in conditions if where is None or (c[0], c[1]) != (where[0], "eq")]
    if sort_field == "id" or sort_field in viewable:
        return listed.view(where, sort_field, descending), left, True
    rows = listed.in_id_order if where is None else listed.where(*where)
    return rows, left, False


def _position(rows: Sequence[Row[Any]], marker: str | None, by_id: bool) -> int:
    """Where the page the marker names starts: at the row of that id (found by halving when
    the rows are in id order), or at the first row for a marker of no row."""
    if not marker:
        return 0
    if by_id:
        at = bisect_left(rows, marker, key=row_id)
        return at if at < len(rows) and rows[at][0] == marker else 0
    return next((i for i, (item_id, _, _) in enumerate(rows) if item_id == marker), 0)


def _itself(obj: T) -> T:
    return obj


def _conditions(query: MultiMapping[str], filterable: list[str]) -> list[Condition]:
    """(field, modifier, values) for each filter in the query; unknown keys are ignored."""
    found: list[Condition] = []
    for key in dict.fromkeys(query.keys()):
        name, modifier = key, "eq"
        head, _, tail = key.rpartition("_")
        if head and tail in MODIFIERS:
            name, modifier = head, tail
        if name in filterable:
            found.append((name, modifier, list(query.getall(key))))
    return found


def _matches(row: Row[Any], conditions: list[Condition], schema: Schema) -> bool:
    for name, modifier, values in conditions:
        value = _value(row, name, schema)
        if modifier == "eq" and value != values[0]:
            return False
        if modifier == "ne" and value == values[0]:
            return False
        if modifier == "in" and value not in values:
            return False
        if modifier == "notin" and value in values:
            return False
    return True


def _value(row: Row[Any], name: str, schema: Schema) -> str:
    """A field's value as filters and sorting compare it; `type` is the schema's, as
    `resource` sets it on every rendered resource."""
    item_id, fields, _ = row
    if name == "id":
        return item_id
    return schema.id if name == "type" else text(fields.get(name))


def _limit(text: str | None) -> int:
    try:
        limit = int(text) if text is not None else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT
    if limit == -1 or limit > MAX_LIMIT:
        return MAX_LIMIT
    return limit if limit > 0 else DEFAULT_LIMIT
