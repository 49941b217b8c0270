"""Liveness and readiness, unauthenticated: they say nothing about any user's data."""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.deps import DEPS
from corral.apiserver.http.encoding import json_response

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    readiness = request.app[DEPS].readiness
    if readiness.ready:
        return json_response({"status": "ok"})
    return json_response({"status": "waiting", "pending": readiness.pending}, status=503)
