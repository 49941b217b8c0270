"""`/v3/authConfigs`: the sign-in providers' configurations, for administrators (others see an
empty collection, as in Rancher).

`local` is always there and always enabled. `oidc` and `keycloakoidc` are OpenID Connect
providers (one implementation, each its own configuration): `issuer`, `clientId`,
`clientSecret` (write-only: kept in the Secret svc-system/<id>config-clientsecret, never
returned), `scope` (space-separated, with `openid`), `groupsClaim`, `enabled`, and the
read-only `redirectUri` to register with the provider. `github` is an OAuth app on github.com
or a GitHub Enterprise host: `hostname`, `tls`, `clientId`, `clientSecret` (write-only),
`accessMode`, `allowedPrincipalIds`, `certificate`, `enabled`, `redirectUri`. Actions
(Rancher's names):

- `configureTest`: the stored configuration with the body's fields over it, nothing saved.
  OpenID Connect: discovery at the issuer (which must name itself exactly), its key set, the
  code flow and PKCE S256; answers `oidcTestOutput` with the endpoints found and
  `redirectUrl`, where a browser starts signing in. GitHub: `githubConfigTestOutput` whose
  `redirectUrl` is the authorize page that gives the code testAndApply needs.
- `testAndApply`: `{"oidcConfig": {...}, "enabled": true}`, tried as above, saved only if
  good; GitHub's `{"githubConfig": {...}, "code": "...", "enabled": true}` exchanges the code.
- `disable`: stops sign-ins through it, and every token its sign-ins made stops working.

A PUT merges the fields given; a configuration that would be enabled is tried first, so a
provider cannot be enabled in a state where no one could sign in (GitHub is enabled only by
testAndApply, the one way to try it). An OpenID Connect client secret is proven only by the
first code exchange (nothing else uses it).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.http.body import AUTH_LIMIT, read_input
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import authconfigs
from corral.core import errors
from corral.core.auth import github_config, oidc_config, principals

PROVIDERS = [principals.LOCAL, *authconfigs.CONFIGURABLE]

SCHEMA = Schema(
    id="authConfig",
    plural="authConfigs",
    fields={
        "name": readonly("string", "The provider: local or oidc"),
        "enabled": Field("boolean", update=True, default=False),
        "issuer": Field("string", update=True),
        "clientId": Field("string", update=True),
        "clientSecret": Field("password", update=True, write_only=True),
        "scope": Field("string", update=True, default=oidc_config.DEFAULT_SCOPE),
        "groupsClaim": Field("string", update=True, default=oidc_config.DEFAULT_GROUPS_CLAIM),
        "hostname": Field("string", update=True, default=github_config.GITHUB_COM),
        "tls": Field("boolean", update=True, default=True),
        "accessMode": Field("enum", update=True, default=github_config.UNRESTRICTED,
                            options=github_config.ACCESS_MODES),
        "allowedPrincipalIds": Field("array[string]", update=True),
        "certificate": Field("string", update=True),
        "redirectUri": readonly("string", "The redirect URI to register with the provider"),
    },
    resource_methods=("GET", "PUT"),
    collection_methods=("GET",),
    resource_actions={
        "configureTest": {"input": "authConfig", "output": "oidcTestOutput"},
        "testAndApply": {"input": "oidcApplyInput", "output": "authConfig"},
        "disable": {"output": "authConfig"},
    },
)  # fmt: skip
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
GITHUB_TEST_OUTPUT = Schema(
    id="githubConfigTestOutput", plural="githubConfigTestOutputs", embedded=True,
    fields={"redirectUrl": readonly("string")},
)  # fmt: skip
GITHUB_APPLY_INPUT = Schema(
    id="githubConfigApplyInput", plural="githubConfigApplyInputs", embedded=True,
    fields={"githubConfig": Field("authConfig", create=True, required=True),
            "code": Field("string", create=True, required=True),
            "enabled": Field("boolean", create=True, default=True)},
)  # fmt: skip
ACTIONS = {"configureTest", "testAndApply", "disable"}


def fields(ask: Ask, provider: str) -> dict[str, Any]:
    if provider == principals.LOCAL:
        return {"id": "local", "name": "local", "enabled": True}
    base = ask.deps.external_url
    if provider == principals.GITHUB:
        github = authconfigs.stored_github(ask.deps)
        return {
            "id": provider, "name": provider, "enabled": github.enabled,
            "hostname": github.hostname, "tls": github.tls, "clientId": github.client_id,
            "accessMode": github.access_mode,
            "allowedPrincipalIds": list(github.allowed_principal_ids),
            "certificate": github.certificate,
            "redirectUri": base + github_config.CALLBACK_PATH,
        }  # fmt: skip
    config = authconfigs.stored(ask.deps, provider)
    return {
        "id": provider, "name": provider, "enabled": config.enabled,
        "issuer": config.issuer, "clientId": config.client_id, "scope": config.scope,
        "groupsClaim": config.groups_claim,
        "redirectUri": base + oidc_config.callback_path(provider),
    }  # fmt: skip


async def update(ask: Ask, provider: str, body: dict[str, Any]) -> str:
    await authconfigs.update(ask.deps, provider, body)
    return provider


FAMILY = Family[str](
    schema=SCHEMA,
    # For administrators only: anyone else finds an empty collection, as in Rancher.
    listed=lambda ask: PROVIDERS if ask.who.is_admin else [],
    find=lambda ask, provider: provider if provider in PROVIDERS and ask.who.is_admin else None,
    fields=fields,
    ident=lambda provider: provider,
    actions=lambda ask, provider: sorted(ACTIONS) if provider != principals.LOCAL else [],
    # The local provider has nothing to configure: no update link.
    before_update=lambda ask, provider: authconfigs.may_configure(provider),
    update=update,
    body_limit=AUTH_LIMIT,
)
routes = handlers.routes(FAMILY)


@routes.post(v3("authconfigs", "/{id}"))
async def config_action(request: web.Request) -> web.Response:
    name = action(request, ACTIONS)
    asked, provider = await handlers.found(FAMILY, request)
    if provider == principals.LOCAL or name is None:
        raise errors.Unsupported("POST on an authConfig needs ?action= of a configurable one")
    deps = asked.deps
    github = provider == principals.GITHUB
    inputs = {
        "configureTest": SCHEMA,
        "testAndApply": GITHUB_APPLY_INPUT if github else APPLY_INPUT,
    }
    body = await read_input(request, inputs.get(name, name), AUTH_LIMIT)
    if name == "disable":
        await authconfigs.disable(deps, provider)
    elif github:
        callback = deps.external_url + github_config.CALLBACK_PATH
        if name == "configureTest":
            url = authconfigs.try_github(deps, SCHEMA.writable(body, False), callback)
            kind = GITHUB_TEST_OUTPUT.id
            return json_response({"type": kind, "baseType": kind, "redirectUrl": url})
        await authconfigs.test_and_apply_github(deps, _inner(body, "githubConfig"), callback)
    elif name == "configureTest":
        metadata = await authconfigs.try_config(deps, provider, SCHEMA.writable(body, False))
        return json_response({
            "type": TEST_OUTPUT.id, "baseType": TEST_OUTPUT.id,
            "redirectUrl": deps.external_url + oidc_config.login_path(provider),
            "issuer": metadata.get("issuer", ""),
            "authorizationEndpoint": metadata.get("authorization_endpoint", ""),
            "tokenEndpoint": metadata.get("token_endpoint", ""),
            "jwksUri": metadata.get("jwks_uri", ""),
        })  # fmt: skip
    else:
        await authconfigs.test_and_apply(deps, provider, _inner(body, "oidcConfig"))
    return json_response(FAMILY.render(asked, provider))


def _inner(body: dict[str, Any], key: str) -> dict[str, Any]:
    """The apply input with its configuration cut to an authConfig's writable fields."""
    inner = body.get(key)
    return {**body, key: SCHEMA.writable(inner, False)} if isinstance(inner, dict) else body
