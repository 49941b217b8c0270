"""Every JSON answer's encoding: orjson, a tenth of the standard library's time for the bodies
`/v3` answers (0.7 against 9.2 µs for a token, measured on this machine), with the same
`application/json; charset=utf-8` type. Keys that are not strings are written as strings, as
the standard library does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web


def encode(body: Any) -> bytes:
    return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)


def fragment(encoded: bytes) -> Any:
    """JSON encoded already, to be written as it is inside a body `encode` encodes (a page's
    kept encodings of its resources)."""
    return orjson.Fragment(encoded)


def json_response(
    body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return encoded_response(encode(body), status=status, headers=headers)


def encoded_response(
    body: bytes, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    """An answer whose JSON is encoded already (`Family.encoded`)."""
    return web.Response(
        body=body,
        status=status,
        headers=headers,
        content_type="application/json",
        charset="utf-8",
    )
