"""The API root: `GET /v3` names the API version and links its collections."""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.deps import base_url, deps
from corral.apiserver.http.encoding import json_response

API_VERSION = {"group": "management.svc.io", "path": "/v3", "version": "v3"}

routes = web.RouteTableDef()


@routes.get("/v3")
@routes.get("/v3/")
async def api_root(request: web.Request) -> web.Response:
    base = f"{base_url(request)}/v3"
    links = {"root": base, "self": base, "schemas": f"{base}/schemas"}
    for schema in deps(request).schemas.collections():
        links[schema.plural] = f"{base}/{schema.plural.lower()}"
    body = {"type": "apiRoot", "baseType": "apiRoot", "apiVersion": API_VERSION, "links": links}
    return json_response(body, headers={"X-Api-Schemas": f"{base}/schemas"})
