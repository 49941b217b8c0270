"""The middleware every request passes: who calls (authentication, CSRF), their rate limit and
the error body of whatever fails; and the headers of every answer.

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
from corral.apiserver.http import errors, serving
from corral.apiserver.http.errors import ApiError, Handler

RATE_LIMIT = web.RequestKey("rate_limit", Decision)


@web.middleware
async def api_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Who calls and their rate limit, and the API's error body for whatever fails, in one
    layer: each middleware is a coroutine called and awaited per request, as much again as
    the little an unchanged resource's GET does besides."""
    path = request.path
    try:
        if not path.startswith(PUBLIC_PREFIXES) and path not in PUBLIC_PATHS:
            held = request.app[DEPS]
            now = datetime.datetime.now(datetime.UTC)
            who = authenticate(request, held.stores, held.activity, held.verified, now)
            limit = int(held.stores.number(SETTING))
            limiter = held.limiter
            decision = (
                limiter.unlimited(time.time())
                if limit <= 0
                else await limiter.hit(who.user_id, limit, time.time())
            )
            request[RATE_LIMIT] = decision
            if not decision.allowed:
                raise ApiError(429, "TooManyRequests",
                               f"rate limit of {decision.limit} requests per minute exceeded",
                               headers={"Retry-After": str(decision.reset_seconds)})  # fmt: skip
            request[PRINCIPAL] = who
            check_csrf(request, who)
        return await handler(request)
    except Exception as failure:  # noqa: BLE001 - every failure gets the API's error body
        return errors.answer(request, failure)


async def response_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer's headers (`serving.standard_headers`), and on every answer to an
    authenticated request its rate-limit headers, whatever answered it: the handler, an error
    of any kind, a stream or an upgrade. One signal for both: each costs a coroutine per
    answer."""
    serving.standard_headers(response)
    decision = request.get(RATE_LIMIT)
    if decision is not None:
        response.headers.update(decision.headers)
