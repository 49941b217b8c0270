"""`GET /assets/<file>`: node files served from CORRAL_NODE_ASSET_DIR, unauthenticated."""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.deps import deps
from corral.apiserver.services import assets

routes = web.RouteTableDef()


@routes.get("/assets/{file}")  # and HEAD, which installers use to check a URL
async def asset(request: web.Request) -> web.FileResponse:
    # FileResponse streams the file from a thread and answers Range and If-* requests.
    return web.FileResponse(await assets.find(deps(request), request.match_info["file"]))
