"""`/v3/authConfigs`: the sign-in providers' configurations, for administrators (others see an
empty collection, as in Rancher).

`local` is always there and always enabled. `oidc` is the OpenID Connect provider: `issuer`,
`clientId`, `clientSecret` (write-only: kept in the Secret svc-system/oidcconfig-clientsecret,
never returned), `scope` (space-separated, with `openid`), `groupsClaim`, `enabled`, and the
read-only `redirectUri` to register with the provider. Actions (Rancher's names):

- `configureTest`: the stored configuration with the body's fields over it is tried, nothing
  saved: discovery at the issuer (which must name itself exactly), its key set, the code flow
  and PKCE S256. Answers `oidcTestOutput` with the endpoints found and `redirectUrl`, where a
  browser starts signing in.
- `testAndApply`: `{"oidcConfig": {...}, "enabled": true}`, tried as above, saved only if good.
- `disable`: stops sign-ins through it, and every token its sign-ins made stops working.

A PUT merges the fields given; a configuration that would be enabled is tried first, so a
provider cannot be enabled in a state where no one could sign in. The client secret itself is
proven only by the first code exchange (nothing else uses it).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import AUTH_LIMIT, read_json
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.core import errors, settings
from corral.core.auth import oidc_config, principals
from corral.core.auth.oidc_config import CALLBACK_PATH, LOGIN_PATH, OidcConfig
from corral.core.kube import kinds, oidc_secrets
from corral.core.kube.client import as_dict
from corral.core.oidc.provider import Provider, ProviderError

SCHEMA = Schema(
    id="authConfig",
    plural="authConfigs",
    fields={
        "enabled": Field("boolean", update=True, default=False),
        "issuer": Field("string", update=True),
        "clientId": Field("string", update=True),
        "clientSecret": Field("password", update=True, write_only=True),
        "scope": Field("string", update=True, default=oidc_config.DEFAULT_SCOPE),
        "groupsClaim": Field("string", update=True, default=oidc_config.DEFAULT_GROUPS_CLAIM),
        "redirectUri": readonly("string", "The redirect URI to register with the provider"),
    },
    resource_methods=("GET", "PUT"),
    collection_methods=("GET",),
    resource_actions={
        "configureTest": {"input": "authConfig", "output": "oidcTestOutput"},
        "testAndApply": {"input": "oidcApplyInput", "output": "authConfig"},
        "disable": {"output": "authConfig"},
    },
)
TEST_OUTPUT = Schema(
    id="oidcTestOutput", plural="oidcTestOutputs", embedded=True,
    fields={"redirectUrl": readonly("string"), "issuer": readonly("string"),
            "authorizationEndpoint": readonly("string"), "tokenEndpoint": readonly("string"),
            "jwksUri": readonly("string")},
)  # fmt: skip
APPLY_INPUT = Schema(
    id="oidcApplyInput", plural="oidcApplyInputs", embedded=True,
    fields={"oidcConfig": Field("authConfig", create=True, required=True),
            "enabled": Field("boolean", create=True, default=True)},
)  # fmt: skip
ACTIONS = {"configureTest", "testAndApply", "disable"}

routes = web.RouteTableDef()


def _stored(request: web.Request) -> OidcConfig:
    return OidcConfig.from_object(request.app[DEPS].stores.authconfigs.get(principals.OIDC))


def _fields(request: web.Request, provider: str) -> dict[str, Any]:
    if provider == principals.LOCAL:
        return {"id": "local", "name": "local", "enabled": True}
    config = _stored(request)
    return {
        "id": principals.OIDC, "name": principals.OIDC, "enabled": config.enabled,
        "issuer": config.issuer, "clientId": config.client_id, "scope": config.scope,
        "groupsClaim": config.groups_claim,
        "redirectUri": request.app[DEPS].external_url + CALLBACK_PATH,
    }  # fmt: skip


def _render(request: web.Request, provider: str) -> dict[str, Any]:
    actions = sorted(ACTIONS) if provider == principals.OIDC else []
    return envelope.resource(base_url(request), SCHEMA, _fields(request, provider), actions)


def _admin_provider(request: web.Request) -> str:
    """The provider the path names, for administrators; 404 for anyone else."""
    provider = request.match_info["id"]
    if provider not in (principals.LOCAL, principals.OIDC) or not principal(request).is_admin:
        raise errors.not_found(f"authConfig {provider} not found")
    return provider


@routes.get(v3("authconfigs"))
async def list_configs(request: web.Request) -> web.Response:
    shown = [principals.LOCAL, principals.OIDC] if principal(request).is_admin else []
    body = envelope.collection(
        base_url(request), SCHEMA, shown, lambda p: p, lambda p: _fields(request, p),
        lambda p: _render(request, p), request.query, request.path, can_create=False,
    )  # fmt: skip
    return web.json_response(body)


@routes.get(v3("authconfigs", "/{id}"))
async def get_config(request: web.Request) -> web.Response:
    return web.json_response(_render(request, _admin_provider(request)))


@routes.put(v3("authconfigs", "/{id}"))
async def update_config(request: web.Request) -> web.Response:
    if _admin_provider(request) != principals.OIDC:
        raise errors.invalid("id", "the local provider has nothing to configure", "InvalidAction")
    body = await read_json(request, AUTH_LIMIT)
    await _save(request, body, _merged(request, body))
    return web.json_response(_render(request, principals.OIDC))


@routes.post(v3("authconfigs", "/{id}"))
async def config_action(request: web.Request) -> web.Response:
    name = action(request, ACTIONS)
    if _admin_provider(request) != principals.OIDC or name is None:
        raise ApiError(405, "MethodNotAllowed", "POST on an authConfig needs ?action= of oidc")
    body = await read_json(request, AUTH_LIMIT)
    if name == "disable":
        await _save(request, {}, oidc_config.merged(_stored(request), {"enabled": False}))
        return web.json_response(_render(request, principals.OIDC))
    if name == "configureTest":
        config = _merged(request, body)
        metadata = await _test(request, config, await _client_secret(request, body))
        return web.json_response(_test_output(request, metadata))
    given = body.get("oidcConfig")
    if not isinstance(given, dict):
        raise errors.missing("oidcConfig")
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise errors.invalid("enabled", "enabled must be true or false")
    config = _merged(request, {**given, "enabled": enabled})
    await _save(request, given, config)
    return web.json_response(_render(request, principals.OIDC))


def _merged(request: web.Request, body: dict[str, Any]) -> OidcConfig:
    allowed = request.app[DEPS].stores.enabled(settings.LINK_LOCAL_SETTING)
    return oidc_config.merged(_stored(request), body, allowed)


async def _client_secret(request: web.Request, body: dict[str, Any]) -> str | None:
    if body.get("clientSecret") is not None:
        return oidc_config.check_client_secret(body["clientSecret"])
    return await oidc_secrets.read_client_secret(request.app[DEPS].kube)


async def _test(request: web.Request, config: OidcConfig, secret: str | None) -> dict[str, Any]:
    """Discovery at the issuer, with a Provider of its own: nothing cached is touched."""
    if not config.complete:
        raise errors.missing("issuer" if not config.issuer else "clientId")
    if secret is None:
        raise errors.missing("clientSecret")
    provider = Provider(config, secret)
    try:
        metadata = await provider.discover()
        await provider.keys(force=False)
    except ProviderError as exc:
        raise errors.invalid("issuer", str(exc), "InvalidBodyContent") from None
    return metadata


async def _save(request: web.Request, body: dict[str, Any], config: OidcConfig) -> None:
    """Stores the configuration (and a new client secret), after trying it when it would be
    enabled; nothing is stored when the try fails."""
    secret = await _client_secret(request, body)
    if config.enabled:
        await _test(request, config, secret)
    kube = request.app[DEPS].kube
    if body.get("clientSecret") is not None and secret is not None:
        await oidc_secrets.store_client_secret(kube, secret)
    applied = await kube.apply(
        kinds.AuthConfig(metadata=ObjectMeta(name=principals.OIDC), spec=config.spec()),
        force=True,
    )
    request.app[DEPS].stores.authconfigs.put(as_dict(applied))


def _test_output(request: web.Request, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": TEST_OUTPUT.id, "baseType": TEST_OUTPUT.id,
        "redirectUrl": request.app[DEPS].external_url + LOGIN_PATH,
        "issuer": metadata.get("issuer", ""),
        "authorizationEndpoint": metadata.get("authorization_endpoint", ""),
        "tokenEndpoint": metadata.get("token_endpoint", ""),
        "jwksUri": metadata.get("jwks_uri", ""),
    }  # fmt: skip
