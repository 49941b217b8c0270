"""`POST /v3-public/localProviders/local?action=login`: a password for a session token."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from corral.apiserver.auth import sessions
from corral.apiserver.auth.throttle import throttled
from corral.apiserver.deps import deps
from corral.apiserver.http.body import AUTH_LIMIT, description_text, read_input
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.services import tokens
from corral.core import errors
from corral.core.kube import password_secrets

routes = web.RouteTableDef()

FAILED = ApiError(401, "Unauthorized", "authentication failed")
RESPONSE_TYPES = {"json", "cookie", "token", ""}
# Rancher's `basicLogin`: its `ttl` is taken and ignored, as Rancher does (a session lasts
# auth-user-session-ttl-minutes); any other field is refused.
LOGIN_INPUT = Schema(
    id="basicLogin",
    plural="basicLogins",
    embedded=True,
    fields={
        "username": Field("string", create=True, required=True),
        "password": Field("password", create=True, required=True, write_only=True),
        "responseType": Field("enum", create=True, options=("json", "cookie", "token")),
        "description": Field("string", create=True),
        "ttl": Field("int", create=True, description="Ignored: sessions last the setting's TTL"),
    },
)


def required(body: dict[str, Any], field: str) -> str:
    """A field the sign-in cannot do without: absent (or empty) is spec 7's invalid input,
    400 `InvalidFormat` naming it; a value that is not text is 422 as anywhere else."""
    value = body.get(field)
    if value is None or value == "":
        raise ApiError(400, "InvalidFormat", f"{field} is required", field)
    if not isinstance(value, str):
        raise errors.invalid(field, f"{field} must be text")
    return value


@routes.post("/v3-public/{providers:(?i:localproviders)}/local")
async def login(request: web.Request) -> web.Response:
    if request.query.get("action") != "login":
        raise ApiError(422, "InvalidAction", f"Invalid action: {request.query.get('action')}")
    body = await read_input(request, LOGIN_INPUT, AUTH_LIMIT)
    username, password = required(body, "username"), required(body, "password")
    response_type = body.get("responseType", "")
    if not isinstance(response_type, str) or response_type not in RESPONSE_TYPES:
        raise errors.invalid("responseType", "responseType must be json or cookie")
    description = description_text(body)

    held = deps(request)
    stores = held.stores
    user = stores.user_by_username(username)
    user_id = user["metadata"]["name"] if user else None
    if not await verify(request, username, user_id, password):
        raise FAILED
    assert user_id is not None
    if stores.user_active(user_id) is not True:
        raise errors.forbidden("user is disabled")

    issued = await tokens.issue_session(held, user_id, description)
    return sessions.signed_in(request, issued.obj, issued.value, response_type)


async def verify(request: web.Request, username: str, user_id: str | None, password: str) -> bool:
    """Checks the password under the throttle: the attempt is counted before the awaited hash,
    so concurrent attempts cannot all pass the check while the count still reads zero."""
    held, address = deps(request), request.remote or ""
    throttle = held.throttle
    if wait := throttle.reserve(username, address, time.monotonic()):
        raise throttled(wait)
    try:
        verified = await password_secrets.verify(held.kube, user_id, password)
    except BaseException:  # a cancelled check too: its reservation must not stay pending
        throttle.release(username, address)
        raise
    if verified:
        throttle.succeeded(username, address)
    else:
        throttle.refused(username, address, time.monotonic())
    return verified
