"""`/v3-public`: the sign-in providers anyone may list, and the browser sign-in through the
OpenID Connect provider.

1. `GET /v3-public/oidcProviders/oidc/login[?responseType=cookie|json]` answers 302 to the
   provider's authorization endpoint (code flow, PKCE S256, state and nonce) and sets the
   cookie `R_OIDC_STATE`, which seals what the callback must check
   (`corral.core.auth.loginstate`): any replica can finish a sign-in another began.
2. The provider sends the browser back to `GET /v3-public/oidcProviders/oidc/callback`,
   which checks `state` against the cookie, exchanges the code with the verifier, validates
   the ID token (JWKS signature, issuer, audience, expiry, nonce), finds or makes the user,
   and answers exactly as a local login does (`auth.sessions`).

The redirect URI to register with the provider is `<CORRAL_EXTERNAL_URL>` plus the callback
path: never derived from the request's Host.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from aiohttp import web

from corral.apiserver.auth import sessions
from corral.apiserver.auth.throttle import throttled
from corral.apiserver.deps import deps
from corral.apiserver.http.errors import ApiError
from corral.apiserver.services import signin, tokens
from corral.core import errors
from corral.core.auth import id_tokens, loginstate, principals
from corral.core.auth.oidc_config import CALLBACK_PATH, LOGIN_PATH, OidcConfig
from corral.core.oidc.provider import GrantRefused, ProviderError

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

STATE_COOKIE = "R_OIDC_STATE"
STATE_COOKIE_PATH = "/v3-public/oidcProviders/oidc"
# What a provider puts in `error` (RFC 6749 4.1.2.1) is shown back, so only its own grammar.
_ERROR_CODE = re.compile(r"[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}")


def _providers(request: web.Request) -> list[dict[str, Any]]:
    base = deps(request).external_url
    local = f"{base}/v3-public/localProviders/local"
    found = [{"id": "local", "type": "localProvider", "baseType": "authProvider",
              "links": {"self": local}, "actions": {"login": f"{local}?action=login"}}]  # fmt: skip
    config = OidcConfig.from_object(deps(request).stores.authconfigs.get(principals.OIDC))
    if config.enabled:
        found.append({
            "id": "oidc", "type": "oidcProvider", "baseType": "authProvider",
            "redirectUrl": base + LOGIN_PATH, "scopes": config.scopes,
            "links": {"self": f"{base}{STATE_COOKIE_PATH}"}, "actions": {},
        })  # fmt: skip
    return found


@routes.get("/v3-public/{plural:(?i:authproviders)}")
async def list_providers(request: web.Request) -> web.Response:
    data = _providers(request)
    return web.json_response({
        "type": "collection", "resourceType": "authProvider", "data": data,
        "links": {"self": deps(request).external_url + request.path}, "actions": {},
        "pagination": {"limit": len(data), "total": len(data)},
    })  # fmt: skip


@routes.get("/v3-public/{plural:(?i:authproviders)}/{id}")
async def get_provider(request: web.Request) -> web.Response:
    for provider in _providers(request):
        if provider["id"] == request.match_info["id"]:
            return web.json_response(provider)
    raise errors.not_found(f"authProvider {request.match_info['id']} not found")


@routes.get("/v3-public/{plural:(?i:oidcproviders)}/oidc/login")
async def begin(request: web.Request) -> web.Response:
    response_type = request.query.get("responseType", "cookie")
    if response_type not in loginstate.RESPONSE_TYPES:
        raise errors.invalid("responseType", "responseType must be cookie or json")
    held = deps(request)
    provider = await signin.enabled_provider(held)
    try:
        url, login = await provider.begin(_callback(request), response_type)
    except ProviderError as exc:
        raise _unavailable(exc) from None
    key = await held.login_state_key.get(held.kube)
    response = web.Response(status=302, headers={"Location": url})
    response.set_cookie(STATE_COOKIE, loginstate.seal(key, login), path=STATE_COOKIE_PATH,
                        max_age=loginstate.MAX_AGE_SECONDS, httponly=True,
                        secure=request.secure, samesite="Lax")  # fmt: skip
    return response


@routes.get("/v3-public/{plural:(?i:oidcproviders)}/oidc/callback")
async def finish(request: web.Request) -> web.Response:
    held = deps(request)
    provider = await signin.enabled_provider(held)
    sealed, keys = request.cookies.get(STATE_COOKIE, ""), held.login_state_key
    login = loginstate.unseal(await keys.get(held.kube), sealed)
    if login is None and sealed:
        login = loginstate.unseal(await keys.get(held.kube, reread=True), sealed)
    state = request.query.get("state", "")
    if login is None or not state or state != login.state:
        raise _refused("the sign-in's state is missing, expired or not this browser's")
    if error := request.query.get("error"):
        shown = error if _ERROR_CODE.fullmatch(error) else "unreadable error"
        raise _refused(f"the provider refused the sign-in: {shown}")
    code = request.query.get("code", "")
    if not code or len(code) > 4096:
        raise _refused("the provider sent no authorization code")
    # Each code is sent on to the provider: refused ones are counted as failed logins are,
    # per sign-in and per address, so a replayed state cannot make corral hammer it.
    throttle, address, attempt = held.throttle, request.remote or "", f"oidc:{state}"
    if wait := throttle.reserve(attempt, address, time.monotonic()):
        raise throttled(wait)
    try:
        identity = await provider.finish(code, login, _callback(request))
    except (GrantRefused, id_tokens.InvalidIdToken) as exc:
        throttle.refused(attempt, address, time.monotonic())
        raise _refused(str(exc)) from None
    except ProviderError as exc:
        throttle.release(attempt, address)
        raise _unavailable(exc) from None
    throttle.succeeded(attempt, address)
    user = await signin.user_for(held, identity)
    principal = principals.user_principal(principals.OIDC, identity.subject)
    issued = await tokens.issue_session(held, user["metadata"]["name"], "oidc sign-in",
                                        principals.OIDC, principal)  # fmt: skip
    response = sessions.signed_in(request, issued.obj, issued.value, login.response_type)
    response.del_cookie(STATE_COOKIE, path=STATE_COOKIE_PATH)  # one sign-in per state
    return response


def _callback(request: web.Request) -> str:
    return deps(request).external_url + CALLBACK_PATH


def _refused(reason: str) -> ApiError:
    log.warning("oidc sign-in refused: %s", reason)
    return ApiError(401, "Unauthorized", f"authentication failed: {reason}")


def _unavailable(exc: ProviderError) -> ApiError:
    log.warning("oidc provider unavailable: %s", exc)
    return ApiError(503, "ProviderUnavailable", f"the oidc provider cannot be used: {exc}")
