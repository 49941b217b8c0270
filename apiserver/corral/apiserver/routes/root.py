"""The API root: `GET /v3` names the API version and links its collections."""

from __future__ import annotations

from aiohttp import web

API_VERSION = {"group": "management.svc.io", "path": "/v3", "version": "v3"}

routes = web.RouteTableDef()


@routes.get("/v3")
@routes.get("/v3/")
async def api_root(request: web.Request) -> web.Response:
    base = f"{request.url.origin()}/v3"
    body = {
        "type": "apiRoot",
        "baseType": "apiRoot",
        "apiVersion": API_VERSION,
        "links": {"root": base, "self": base},
    }
    return web.json_response(body)
