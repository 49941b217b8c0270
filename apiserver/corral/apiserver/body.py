"""Reading request bodies: bounded, JSON, an object."""

from __future__ import annotations

import json
import os
from typing import Any

from aiohttp import web

from corral.apiserver.errors import ApiError
from corral.core.quantity import parse_bytes

# Every /v3 body is bounded; authentication endpoints by SVC_AUTH_API_BODY_LIMIT.
DEFAULT_LIMIT = 2 * 1024 * 1024
AUTH_LIMIT = parse_bytes(os.environ.get("SVC_AUTH_API_BODY_LIMIT", "1Mi"))


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"request body exceeds {limit} bytes")


async def read_json(request: web.Request, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
    """The body as a JSON object; an empty body is an empty object."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    raw = await request.content.read(limit + 1)
    if len(raw) > limit:
        raise too_large(limit)
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(422, "InvalidBodyContent", f"Failed to parse body: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(422, "InvalidBodyContent", "body must be a JSON object")
    return body
