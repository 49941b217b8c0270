"""The session cookies: set by a successful sign-in, whichever provider confirmed the user,
and cleared by a logout. The token goes in the `R_SESS` cookie (200, no body) or in a JSON
body (201); the `CSRF` cookie goes with it."""

from __future__ import annotations

import secrets

from aiohttp import web

from corral.apiserver.auth.authn import CSRF_COOKIE, SESSION_COOKIE
from corral.apiserver.http.encoding import json_response
from corral.core import times
from corral.core.auth import ttl
from corral.core.kube.informer import Obj


def signed_in(request: web.Request, token: Obj, value: str, response_type: str) -> web.Response:
    """The answer to a sign-in that issued `token`, whose `<name>:<key>` is `value`."""
    expiry = ttl.expires_at(times.parse_time(token["metadata"]["creationTimestamp"]),
                            token["spec"]["ttlMillis"])  # fmt: skip
    name = token["metadata"]["name"]
    if response_type == "cookie":
        response = web.Response(status=200)
        response.set_cookie(SESSION_COOKIE, value, path="/", httponly=True,
                            secure=request.secure, samesite="Lax")  # fmt: skip
    else:
        response = json_response({
            "type": "token", "baseType": "token", "id": name, "token": value,
            "expiresAt": times.format_time(expiry) if expiry else "",
        }, status=201)  # fmt: skip
    # Readable by scripts (not HttpOnly): a browser echoes it in X-API-CSRF.
    response.set_cookie(CSRF_COOKIE, secrets.token_hex(16), path="/", secure=request.secure,
                        samesite="Lax")  # fmt: skip
    return response


def signed_out(request: web.Request) -> web.Response:
    """The answer to a logout: both cookies cleared."""
    response = web.Response(status=200)
    for cookie in (SESSION_COOKIE, CSRF_COOKIE):
        response.set_cookie(cookie, "", max_age=0, path="/", secure=request.secure,
                            httponly=cookie == SESSION_COOKIE, samesite="Lax")  # fmt: skip
    return response
