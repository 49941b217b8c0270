"""The answer to a successful sign-in, whichever provider confirmed the user: the session
token in the `R_SESS` cookie (200, no body) or in a JSON body (201), and the `CSRF` cookie."""

from __future__ import annotations

import secrets

from aiohttp import web

from corral.apiserver.auth.authn import CSRF_COOKIE, SESSION_COOKIE
from corral.apiserver.services.tokens import Issued
from corral.core import times
from corral.core.auth import ttl


def respond(request: web.Request, issued: Issued, response_type: str) -> web.Response:
    expiry = ttl.expires_at(times.parse_time(issued.obj["metadata"]["creationTimestamp"]),
                            issued.obj["spec"]["ttlMillis"])  # fmt: skip
    name = issued.obj["metadata"]["name"]
    if response_type == "cookie":
        response = web.Response(status=200)
        response.set_cookie(SESSION_COOKIE, issued.value, path="/", httponly=True,
                            secure=request.secure, samesite="Lax")  # fmt: skip
    else:
        response = web.json_response({
            "type": "token", "baseType": "token", "id": name, "token": issued.value,
            "expiresAt": times.format_time(expiry) if expiry else "",
        }, status=201)  # fmt: skip
    # Readable by scripts (not HttpOnly): a browser echoes it in X-API-CSRF.
    response.set_cookie(CSRF_COOKIE, secrets.token_hex(16), path="/", secure=request.secure,
                        samesite="Lax")  # fmt: skip
    return response
