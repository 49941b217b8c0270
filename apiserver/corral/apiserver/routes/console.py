"""The web console: `GET /` and its content-hashed files under `/static/`, unauthenticated.

The console is static (built from `console/` by `make console` into `webconsole/`, package
data): it signs in and reads everything through the public API like any other client, so
serving it needs no one's identity. The page's policy allows only corral's own scripts,
styles, images and connections; no inline script runs, even one an attacker got into a page.
A file's name changes with its content, so it may be cached for good; the page that names
them is revalidated on every load.
"""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import web

from corral.core import errors

BUILT = Path(__file__).resolve().parent.parent / "webconsole"
INDEX = "index.html"
STATIC = "static"

CONTENT_SECURITY_POLICY = "; ".join((
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    # 'self' covers the page's own wss: origin, the subscription's.
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
))  # fmt: skip
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
# One path segment the build names (`index-<hash>.js`): never `..`, a folder or a dotfile.
FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
IMMUTABLE = "public, max-age=31536000, immutable"

routes = web.RouteTableDef()


@routes.get("/")
async def page(request: web.Request) -> web.FileResponse:
    index = BUILT / INDEX
    if not index.is_file():
        raise errors.not_found("the console is not built into this server: run `make console`")
    return web.FileResponse(index, headers={**PAGE_HEADERS, "Cache-Control": "no-cache"})


@routes.get("/static/{file}")
async def static(request: web.Request) -> web.FileResponse:
    name = request.match_info["file"]
    path = BUILT / STATIC / name
    # FileResponse serves the build's `.br` or `.gz` beside the file to a client that takes it.
    if not FILE_NAME.fullmatch(name) or not path.is_file():
        raise errors.not_found(f"console file {name} not found")
    return web.FileResponse(path, headers={**PAGE_HEADERS, "Cache-Control": IMMUTABLE})
