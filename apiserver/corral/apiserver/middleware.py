"""The middleware every request passes: who calls (authentication, CSRF) and their rate limit.

The rules are `auth`'s; this module applies them to a request with what the application holds.
"""

from __future__ import annotations

import datetime
import time

from aiohttp import web

from corral.apiserver.auth.authn import (
    PRINCIPAL,
    PUBLIC_PATHS,
    PUBLIC_PREFIXES,
    authenticate,
    check_csrf,
)
from corral.apiserver.auth.ratelimit import SETTING, Decision
from corral.apiserver.deps import DEPS
from corral.apiserver.http.errors import ApiError, Handler

RATE_LIMIT = web.RequestKey("rate_limit", Decision)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path.startswith(PUBLIC_PREFIXES) or request.path in PUBLIC_PATHS:
        return await handler(request)
    held = request.app[DEPS]
    now = datetime.datetime.now(datetime.UTC)
    who = authenticate(request, held.stores, held.activity, held.verified, now)
    limit = int(held.stores.number(SETTING))
    decision = await held.limiter.hit(who.user_id, limit, time.time())
    request[RATE_LIMIT] = decision
    if not decision.allowed:
        raise ApiError(429, "TooManyRequests",
                       f"rate limit of {decision.limit} requests per minute exceeded",
                       headers={"Retry-After": str(decision.reset_seconds)})  # fmt: skip
    request[PRINCIPAL] = who
    check_csrf(request, who)
    return await handler(request)


async def rate_limit_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every response to an authenticated request carries its rate-limit headers, whatever
    answered it: the handler, an error of any kind, a stream or an upgrade."""
    decision = request.get(RATE_LIMIT)
    if decision is not None:
        response.headers.update(decision.headers)
