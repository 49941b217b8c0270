"""The `/v1` (Steve) envelope (provisioning.md 4.6): a Kubernetes-shaped object flattened into
a resource, and collections of them.

A resource is `{id, type, links, apiVersion, kind, metadata, spec, status}` with `id`
`<namespace>/<name>`; an object key that clashes with the envelope's own (`id`, `type`,
`links`, `actions`) moves to `_<key>`. A collection is `{type: collection, links, createTypes,
actions, resourceType, revision, data}`, paged by `limit` and an opaque `continue` token.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

from multidict import MultiMapping

from corral.core import errors

RESERVED = ("id", "type", "links", "actions")
T = TypeVar("T")
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10000


def resource_url(base: str, plural: str, resource_id: str) -> str:
    return f"{base}/v1/{plural}/{resource_id}"


def namespaced_id(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def resource(
    base: str,
    schema_id: str,
    plural: str,
    obj: Mapping[str, Any],
    writable: bool,
    links: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`obj` (namespaced) as a resource; `update` and `remove` links when the caller may use
    them, as Steve adds them by the caller's verbs."""
    meta = obj["metadata"]
    resource_id = namespaced_id(meta["namespace"], meta["name"])
    url = resource_url(base, plural, resource_id)
    all_links = {"self": url}
    if writable:
        all_links |= {"update": url, "remove": url}
    all_links |= links or {}
    flattened = {(f"_{k}" if k in RESERVED else k): v for k, v in obj.items()}
    return {"id": resource_id, "type": schema_id, "links": all_links, **flattened}


def collection(
    base: str,
    path: str,
    schema_id: str,
    plural: str,
    rows: Iterable[tuple[str, T]],
    render: Callable[[T], dict[str, Any]],
    query: MultiMapping[str],
    revision: str,
    can_create: bool,
) -> dict[str, Any]:
    """Objects, each with its resource id, as a collection in id order: one page of them,
    rendered (a page costs the page, not the listing)."""
    ordered = sorted(rows, key=lambda row: row[0])
    limit = _limit(query.get("limit"))
    start = 0
    if token := query.get("continue"):
        after = _decoded(token)
        start = next((i for i, (rid, _) in enumerate(ordered) if rid > after), len(ordered))
    page = ordered[start : start + limit]
    body: dict[str, Any] = {
        "type": "collection",
        "links": {"self": f"{base}{path}"},
        "createTypes": {schema_id: f"{base}/v1/{plural}"} if can_create else {},
        "actions": {},
        "resourceType": schema_id,
        "revision": revision,
        "count": len(ordered),
    }
    if start + limit < len(ordered):
        token = base64.urlsafe_b64encode(page[-1][0].encode()).decode()
        params = [(k, v) for k, v in query.items() if k != "continue"] + [("continue", token)]
        body["continue"] = token
        body["pagination"] = {
            "limit": limit,
            "partial": True,
            "next": f"{base}{path}?{urlencode(params)}",
        }
    body["data"] = [render(obj) for _, obj in page]
    return body


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    try:
        limit = int(text)
    except ValueError:
        raise errors.invalid("limit", "limit must be a whole number") from None
    return min(limit, MAX_LIMIT) if limit > 0 else DEFAULT_LIMIT


def _decoded(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise errors.invalid("continue", "continue must be a token of a previous page") from None
