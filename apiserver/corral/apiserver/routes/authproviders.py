"""`/v3-public`: the sign-in providers anyone may list, and the browser sign-in through the
OpenID Connect providers (`oidc` at `/v3-public/oidcProviders/oidc`, `keycloakoidc` at
`/v3-public/keycloakOIDCProviders/keycloakoidc`) and GitHub
(`/v3-public/githubProviders/github`), each the same two steps:

1. `GET <provider path>/login[?responseType=cookie|json][&returnTo=<path>]` answers 302 to the
   provider's authorization endpoint (code flow, PKCE S256, state, and for OpenID Connect a
   nonce) and sets the cookie `R_OIDC_STATE` (its path the provider's), which seals what the
   callback must check (`corral.core.auth.loginstate`): any replica can finish a sign-in
   another began.
2. The provider sends the browser back to `GET <provider path>/callback`, which checks
   `state` against the cookie and exchanges the code with the verifier. OpenID Connect: the ID
   token is validated (JWKS signature, issuer, audience, expiry, nonce). GitHub: the user, their
   organisations and teams are read with the access token, and the access mode applied. Then
   the user is found or made, and the answer is exactly a local login's (`auth.sessions`);
   a cookie sign-in begun with `returnTo` answers 303 to that path of corral instead, so a
   browser (the console) lands back on its page signed in.

A sign-in begun with `returnTo` that does not complete (the user cancels at the provider, a
bad or expired state, a provider not enabled, a user corral refuses) sends the browser back to
the console's sign-in page with a fixed word for why (`/?signInError=<reason>#<page>`,
`loginstate.REFUSAL_REASONS`) instead of the error body, which every other client still gets.

The redirect URI to register with the provider is `<CORRAL_EXTERNAL_URL>` plus the callback
path: never derived from the request's Host.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from corral.apiserver.auth import sessions
from corral.apiserver.auth.throttle import throttled
from corral.apiserver.deps import Deps, deps
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.errors import ApiError
from corral.apiserver.services import signin, tokens
from corral.core import errors
from corral.core.auth import github_config, id_tokens, loginstate, oidc_config, principals
from corral.core.auth.github_config import GithubConfig
from corral.core.auth.loginstate import LoginState
from corral.core.auth.oidc_config import OidcConfig
from corral.core.auth.principals import Identity
from corral.core.github.client import CodeRefused, GithubError, TokenRefused
from corral.core.oidc.provider import GrantRefused, ProviderError

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

STATE_COOKIE = "R_OIDC_STATE"
# What a provider puts in `error` (RFC 6749 4.1.2.1) is shown back, so only its own grammar.
_ERROR_CODE = re.compile(r"[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}")
MAX_CODE = 4096


def _providers(request: web.Request) -> list[dict[str, Any]]:
    held = deps(request)
    base = held.external_url
    local = f"{base}/v3-public/localProviders/local"
    found = [{"id": "local", "type": "localProvider", "baseType": "authProvider",
              "links": {"self": local}, "actions": {"login": f"{local}?action=login"}}]  # fmt: skip
    for provider in principals.OIDC_PROVIDERS:
        config = OidcConfig.from_object(held.stores.authconfigs.get(provider), provider)
        if config.enabled:
            found.append({
                "id": provider, "type": oidc_config.PUBLIC_TYPES[provider],
                "baseType": "authProvider", "redirectUrl": base + oidc_config.login_path(provider),
                "scopes": config.scopes,
                "links": {"self": base + oidc_config.public_path(provider)}, "actions": {},
            })  # fmt: skip
    github = GithubConfig.from_object(held.stores.authconfigs.get(principals.GITHUB))
    if github.enabled:
        found.append({
            "id": principals.GITHUB, "type": github_config.PUBLIC_TYPE, "baseType": "authProvider",
            "redirectUrl": base + github_config.LOGIN_PATH, "hostname": github.hostname,
            "clientId": github.client_id, "scopes": github_config.SCOPE.split(),
            "links": {"self": base + github_config.PUBLIC_PATH}, "actions": {},
        })  # fmt: skip
    return found


@routes.get("/v3-public/{plural:(?i:authproviders)}")
async def list_providers(request: web.Request) -> web.Response:
    data = _providers(request)
    return json_response({
        "type": "collection", "resourceType": "authProvider", "data": data,
        "links": {"self": deps(request).external_url + request.path}, "actions": {},
        "pagination": {"limit": len(data), "total": len(data)},
    })  # fmt: skip


@routes.get("/v3-public/{plural:(?i:authproviders)}/{id}")
async def get_provider(request: web.Request) -> web.Response:
    for provider in _providers(request):
        if provider["id"] == request.match_info["id"]:
            return json_response(provider)
    raise errors.not_found(f"authProvider {request.match_info['id']} not found")


# What a provider's sign-in does between the state check and the session: the identity a code
# of this sign-in is. Raises GrantRefused/CodeRefused (and the like) for a refused code.
Finish = Callable[[Deps, str, LoginState, str], Awaitable[Identity]]
Begin = Callable[[Deps, str, str], Awaitable[tuple[str, LoginState]]]


def _sign_in_routes(provider: str, public: str, begin: Begin, finish: Finish) -> None:
    """The login and callback routes of one provider, under its public path."""
    callback = public + "/callback"
    # `/v3-public/oidcProviders/oidc` matched in any case, as Rancher's types are.
    plural, name = public.removeprefix("/v3-public/").split("/")
    pattern = f"/v3-public/{{plural:(?i:{plural.lower()})}}/{name}"

    @routes.get(pattern + "/login")
    async def login(request: web.Request) -> web.Response:
        response_type = request.query.get("responseType", "cookie")
        if response_type not in loginstate.RESPONSE_TYPES:
            raise errors.invalid("responseType", "responseType must be cookie or json")
        return_to = request.query.get("returnTo", "")
        if return_to and (response_type != "cookie" or not loginstate.valid_return_to(return_to)):
            raise errors.invalid("returnTo", "returnTo must be a path on corral (at most 256 "
                                 "characters) and needs responseType cookie")  # fmt: skip
        held = deps(request)
        try:
            url, login = await begin(held, held.external_url + callback, response_type)
        except (ApiError, errors.CorralError) as exc:
            if return_to:
                return _back_to_sign_in(return_to, _reason(exc), public)
            raise
        login = dataclasses.replace(login, return_to=return_to)
        key = await held.login_state_key.get(held.kube)
        response = web.Response(status=302, headers={"Location": url})
        response.set_cookie(STATE_COOKIE, loginstate.seal(key, login), path=public,
                            max_age=loginstate.COOKIE_MAX_AGE_SECONDS, httponly=True,
                            secure=request.secure, samesite="Lax")  # fmt: skip
        return response

    @routes.get(pattern + "/callback")
    async def back(request: web.Request) -> web.Response:
        try:
            return await finish_sign_in(request)
        except (ApiError, errors.CorralError) as exc:
            # A sign-in the console began goes back to its page with the reason; any other
            # client gets the error body as before.
            if return_to := await _began_at(request, deps(request)):
                return _back_to_sign_in(return_to, _reason(exc), public)
            raise

    async def finish_sign_in(request: web.Request) -> web.Response:
        held = deps(request)
        login = await _checked_state(request, held, provider)
        code = request.query.get("code", "")
        if not code or len(code) > MAX_CODE:
            raise _refused(provider, "the provider sent no authorization code", "provider")
        # Each code is sent on to the provider: refused ones are counted as failed logins
        # are, per sign-in and per address, so a replayed state cannot make corral hammer it.
        throttle, address, attempt = (
            held.throttle,
            request.remote or "",
            f"{provider}:{login.state}",
        )
        if wait := throttle.reserve(attempt, address, time.monotonic()):
            raise throttled(wait)
        try:
            identity = await finish(held, code, login, held.external_url + callback)
        except (GrantRefused, id_tokens.InvalidIdToken, CodeRefused, TokenRefused) as exc:
            throttle.refused(attempt, address, time.monotonic())
            raise _refused(provider, str(exc), "code") from None
        except (ProviderError, GithubError) as exc:
            throttle.release(attempt, address)
            raise _unavailable(provider, exc) from None
        except BaseException:  # a cancelled exchange too: its reservation must not stay pending
            throttle.release(attempt, address)
            raise
        throttle.succeeded(attempt, address)
        user = await signin.user_for(held, provider, identity)
        principal = principals.user_principal(provider, identity.subject)
        issued = await tokens.issue_session(held, user["metadata"]["name"], f"{provider} sign-in",
                                            provider, principal)  # fmt: skip
        response = sessions.signed_in(request, issued.obj, issued.value, login.response_type)
        if login.return_to:
            # Relative: the browser resolves it against the callback, corral's external URL.
            response.set_status(303)
            response.headers["Location"] = login.return_to
        response.del_cookie(STATE_COOKIE, path=public)  # one sign-in per state
        return response


async def _began_at(request: web.Request, held: Deps) -> str:
    """The console page a refused sign-in began on, read from this browser's state cookie
    (authentic, of any age: an expired attempt is owed an answer too); "" for none."""
    sealed = request.cookies.get(STATE_COOKIE, "")
    if not sealed:
        return ""
    keys = held.login_state_key
    return loginstate.return_to_of(await keys.get(held.kube), sealed) or loginstate.return_to_of(
        await keys.get(held.kube, reread=True), sealed
    )


def _back_to_sign_in(return_to: str, reason: str, public: str) -> web.Response:
    """303 to the console's sign-in page with why the sign-in did not complete; the attempt's
    state is spent."""
    response = web.Response(
        status=303, headers={"Location": loginstate.sign_in_page(return_to, reason)}
    )
    response.del_cookie(STATE_COOKIE, path=public)
    return response


def _reason(exc: ApiError | errors.CorralError) -> str:
    """The word the console's sign-in page shows a refusal by (loginstate.REFUSAL_REASONS)."""
    match exc:
        case SignInRefused():
            return exc.reason
        case errors.NotFound():
            return "disabled"  # the provider is not enabled: 404, as for one that does not exist
        case errors.Forbidden() | errors.Conflict():
            return "user"
        case ApiError(status=429):
            return "throttled"
        case ApiError(status=503) | errors.Unavailable():
            return "unavailable"
        case _:
            return "failed"


async def _checked_state(request: web.Request, held: Deps, provider: str) -> LoginState:
    """The sign-in this browser began, when the callback's `state` is its own; 401 for a
    missing, expired or foreign state and for a provider's `error`."""
    sealed, keys = request.cookies.get(STATE_COOKIE, ""), held.login_state_key
    login = loginstate.unseal(await keys.get(held.kube), sealed)
    if login is None and sealed:
        login = loginstate.unseal(await keys.get(held.kube, reread=True), sealed)
    state = request.query.get("state", "")
    if login is None or not state or state != login.state:
        raise _refused(
            provider, "the sign-in's state is missing, expired or not this browser's", "state"
        )
    if error := request.query.get("error"):
        shown = error if _ERROR_CODE.fullmatch(error) else "unreadable error"
        reason = "cancelled" if error == "access_denied" else "provider"
        raise _refused(provider, f"the provider refused the sign-in: {shown}", reason)
    return login


def _oidc(provider: str) -> tuple[Begin, Finish]:
    async def begin(held: Deps, redirect_uri: str, response_type: str) -> tuple[str, LoginState]:
        found = await signin.enabled_provider(held, provider)
        try:
            return await found.begin(redirect_uri, response_type)
        except ProviderError as exc:
            raise _unavailable(provider, exc) from None

    async def finish(held: Deps, code: str, login: LoginState, redirect_uri: str) -> Identity:
        found = await signin.enabled_provider(held, provider)
        return await found.finish(code, login, redirect_uri)

    return begin, finish


async def _github_begin(
    held: Deps, redirect_uri: str, response_type: str
) -> tuple[str, LoginState]:
    return (await signin.enabled_github(held)).begin(redirect_uri, response_type)


async def _github_finish(held: Deps, code: str, login: LoginState, redirect_uri: str) -> Identity:
    github = await signin.enabled_github(held)
    identity = await github.finish(code, login, redirect_uri)
    signin.admit_github(held, github.config, identity)
    return identity


for _provider in principals.OIDC_PROVIDERS:
    _sign_in_routes(_provider, oidc_config.public_path(_provider), *_oidc(_provider))
_sign_in_routes(principals.GITHUB, github_config.PUBLIC_PATH, _github_begin, _github_finish)


class SignInRefused(ApiError):
    """401 for a sign-in the provider or its state refused; `reason` is the word of
    loginstate.REFUSAL_REASONS a console's browser is sent back with."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(401, "Unauthorized", message)
        self.reason = reason


def _refused(provider: str, why: str, reason: str) -> SignInRefused:
    log.warning("%s sign-in refused: %s", provider, why)
    return SignInRefused(f"authentication failed: {why}", reason)


def _unavailable(provider: str, exc: Exception) -> ApiError:
    log.warning("%s provider unavailable: %s", provider, exc)
    return ApiError(503, "ProviderUnavailable", f"the {provider} provider cannot be used: {exc}")
