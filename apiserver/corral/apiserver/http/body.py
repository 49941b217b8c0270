"""Reading request bodies (bounded, JSON, an object) and the fields in them.

A body that is not JSON, or not a JSON object, is 400 `InvalidBodyContent` (spec 7: invalid
input); a JSON object whose values do not validate is 422.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from aiohttp import web

from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.schemas import Schema
from corral.core import errors
from corral.core.api import text as characters
from corral.core.kube.informer import Obj
from corral.core.quantity import parse_bytes

# Every /v3 body is bounded; authentication endpoints by SVC_AUTH_API_BODY_LIMIT.
DEFAULT_LIMIT = 2 * 1024 * 1024
AUTH_LIMIT = parse_bytes(os.environ.get("SVC_AUTH_API_BODY_LIMIT", "1Mi"))
# No /v3 body nests deeper than a workload's affinity rules (about ten levels); a bound keeps
# recursive code downstream of the parser (rendering, merging, Kubernetes' own clients) safe.
MAX_DEPTH = 64
_CHUNK = 64 * 1024


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"request body exceeds {limit} bytes")


def unparsable(reason: str) -> ApiError:
    return ApiError(400, "InvalidBodyContent", f"Failed to parse body: {reason}")


async def read_bounded(request: web.Request, limit: int) -> bytes:
    """The whole body, however it arrives (several TCP writes, chunked), up to `limit` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    raw = bytearray()
    async for chunk in request.content.iter_chunked(_CHUNK):
        raw += chunk
        if len(raw) > limit:
            raise too_large(limit)
    return bytes(raw)


def parse_object(raw: bytes) -> dict[str, Any]:
    """A JSON object from bytes; an empty body is an empty object."""
    if not raw.strip():
        return {}
    try:
        # NaN and the infinities, which Python's parser takes and JSON does not, are refused
        # below with the field that holds them, as a number too large for a float is.
        body = json.loads(raw)
    except RecursionError:
        raise unparsable(f"JSON nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise unparsable(str(exc)) from None
    if not isinstance(body, dict):
        raise ApiError(400, "InvalidBodyContent", "body must be a JSON object")
    if nesting(body) > MAX_DEPTH:
        raise unparsable(f"JSON nests deeper than {MAX_DEPTH} levels")
    if found := characters.unstorable(body):
        # Refused once, here, for every family: a lone surrogate cannot be encoded on its way
        # to Kubernetes (it was a 500), NUL ends a string for whatever reads it in C, and a
        # number that is not finite is no JSON number.
        where, char = found[0][:256], found[1]
        raise ApiError(422, "InvalidFormat", f"{where or 'a key'} holds {char}", where or None)
    return body


def nesting(value: Any) -> int:
    """How deeply lists and objects nest in a parsed JSON value (walked without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


async def read_json(request: web.Request, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """The body as a JSON object; an empty body is an empty object."""
    return parse_object(await read_bounded(request, limit))


async def read_input(
    request: web.Request, schema: Schema | str, limit: int = DEFAULT_LIMIT
) -> dict[str, Any]:
    """The body of an action or a sign-in: a JSON object of the fields of its input `schema`
    and no others (422 naming the first other). Given the action's name instead, the action
    takes no input, and any field is refused."""
    body = await read_json(request, limit)
    if isinstance(schema, Schema):
        schema.refuse_unknown(body)
    elif body:
        raise errors.unknown(next(iter(body)), f"the input of {schema}, which takes none")
    return body


def text(body: dict[str, Any], field: str, max_length: int = 1024, required: bool = False) -> str:
    value = body.get(field, "")
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value) > max_length:
        raise errors.invalid(field, f"{field} must be text of at most {max_length} characters")
    if required and not value:
        raise errors.missing(field)
    return value


def name_text(
    body: dict[str, Any], field: str, max_length: int = 256, required: bool = False
) -> str:
    """A name or display name: text of one line, without bidirectional formatting."""
    return characters.check_name(text(body, field, max_length, required), field)


def description_text(
    body: dict[str, Any], field: str = "description", max_length: int = 1024
) -> str:
    return characters.check_description(text(body, field, max_length), field)


def or_empty(value: Any, empty: Any) -> Any:
    """A list or object field's value, `empty` when null. Any other value goes on to be
    checked as given: `value or empty` would take `""`, `0` or `false` for nothing."""
    return empty if value is None else value


def either(body: dict[str, Any], fields: tuple[str, str], max_length: int) -> str:
    """A required text given under its `/v3` name or its stored name (`clusterId` or
    `clusterName`)."""
    value = text(body, fields[0], max_length) or text(body, fields[1], max_length)
    if not value:
        raise errors.missing(fields[0])
    return value


def referenced(find: Callable[[], Obj], field: str, what: str) -> Obj:
    """An object a body names: one the caller cannot see is an invalid reference, exactly as
    one that does not exist."""
    try:
        return find()
    except errors.NotFound:
        raise errors.invalid(field, f"{what} not found", "InvalidReference") from None


def flag(body: dict[str, Any], field: str, default: bool) -> bool:
    value = body.get(field, default)
    if not isinstance(value, bool):
        raise errors.invalid(field, f"{field} must be true or false")
    return value
