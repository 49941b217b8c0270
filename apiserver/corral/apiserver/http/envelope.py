"""The wire envelope: resources and collections the way Rancher-style (norman) clients read them.

A resource carries `id`, `type`, `baseType`, `links` (`self`, plus `update`/`remove` when those
methods exist) and `actions`. A collection carries `type: collection`, `resourceType`, `data`,
`links`, `actions`, `createTypes`, `pagination`, `sort` and `filters`; filtering (`field`,
`field_ne`, `field_in`, `field_notin`), sorting and paging follow norman's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

from multidict import MultiMapping

from corral.apiserver.http.schemas import Schema

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10000
MODIFIERS = ("ne", "in", "notin")

T = TypeVar("T")
# An object of a collection: its id, its filterable fields (when the query needs them), itself.
Row = tuple[str, Mapping[str, Any], T]


def resource_url(base: str, schema: Schema, resource_id: str) -> str:
    return f"{base}/v3/{schema.plural}/{resource_id}"


def resource(
    base: str,
    schema: Schema,
    body: dict[str, Any],
    actions: Iterable[str] = (),
    links: Mapping[str, str] | None = None,
    url: str | None = None,
) -> dict[str, Any]:
    """Decorate a resource body (which carries `id`) with type, links and actions; `url` is
    the resource's own when it is not under `/v3/<plural>` (a nested resource's)."""
    url = url or resource_url(base, schema, body["id"])
    all_links = {"self": url}
    if "PUT" in schema.resource_methods:
        all_links["update"] = url
    if "DELETE" in schema.resource_methods:
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
    render: Callable[[T], dict[str, Any]],
    query: MultiMapping[str],
    path: str,
    can_create: bool,
    default_sort: str = "id",
    newest_first: bool = False,
) -> dict[str, Any]:
    """Filter, sort and page objects into a collection, rendering only the page: a page of a
    long listing costs the page, not the listing.

    `ident` gives an object's `id` and `fields` its filterable values, exactly as `render`
    shows them. Without `sort` and `order` in the query, items sort by `default_sort`,
    descending when `newest_first`."""
    self_url = f"{base}{path}"
    filterable = schema.filters()
    conditions = _conditions(query, filterable)
    sort_field = query.get("sort", default_sort)
    if sort_field not in filterable:
        sort_field = default_sort
    descending = query.get("order", "desc" if newest_first else "asc") == "desc"

    # An object's fields cost several times its id: most pages are neither filtered nor
    # sorted by anything else, and read none.
    wanted = bool(conditions) or sort_field != "id"
    rows = [(ident(obj), fields(obj) if wanted else {}, obj) for obj in objects]
    matching = [row for row in rows if _matches(row, conditions, schema)]
    matching.sort(key=lambda row: _value(row, sort_field, schema), reverse=descending)
    ids = [item_id for item_id, _, _ in matching]

    limit = _limit(query.get("limit"))
    start = 0
    if marker := query.get("marker"):
        start = next((i for i, item_id in enumerate(ids) if item_id == marker), 0)
    page = [render(obj) for _, _, obj in matching[start : start + limit]]

    def page_url(marker_id: str) -> str:
        params = [(k, v) for k, v in query.items() if k != "marker"] + [("marker", marker_id)]
        return f"{self_url}?{urlencode(params)}"

    pagination: dict[str, Any] = {"limit": limit, "total": len(matching)}
    if start > 0 or start + limit < len(matching):
        pagination |= {"partial": True, "first": page_url(ids[0])}
        if start + limit < len(matching):
            pagination["next"] = page_url(ids[start + limit])
        if start > 0:
            pagination["previous"] = page_url(ids[max(start - limit, 0)])
        if len(matching) - limit >= 0:
            pagination["last"] = page_url(ids[len(ids) - limit])
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
        "createTypes": {schema.id: f"{base}/v3/{schema.plural.lower()}"} if can_create else {},
        "actions": {},
        "pagination": pagination,
        "sort": sort,
        "filters": filters,
        "data": page,
    }


def _conditions(
    query: MultiMapping[str], filterable: list[str]
) -> list[tuple[str, str, list[str]]]:
    """(field, modifier, values) for each filter in the query; unknown keys are ignored."""
    found: list[tuple[str, str, list[str]]] = []
    for key in dict.fromkeys(query.keys()):
        name, modifier = key, "eq"
        head, _, tail = key.rpartition("_")
        if head and tail in MODIFIERS:
            name, modifier = head, tail
        if name in filterable:
            found.append((name, modifier, list(query.getall(key))))
    return found


def _matches(row: Row[T], conditions: list[tuple[str, str, list[str]]], schema: Schema) -> bool:
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


def _value(row: Row[T], name: str, schema: Schema) -> str:
    """A field's value as filters and sorting compare it; `type` is the schema's, as
    `resource` sets it on every rendered resource."""
    item_id, fields, _ = row
    if name == "id":
        return item_id
    return schema.id if name == "type" else _text(fields.get(name))


def _text(value: Any) -> str:
    """Values compare as text, with booleans spelled as JSON spells them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _limit(text: str | None) -> int:
    try:
        limit = int(text) if text is not None else DEFAULT_LIMIT
    except ValueError:
        return DEFAULT_LIMIT
    if limit == -1 or limit > MAX_LIMIT:
        return MAX_LIMIT
    return limit if limit > 0 else DEFAULT_LIMIT
