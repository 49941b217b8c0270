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

from corral.apiserver.http.body import AUTH_LIMIT, read_input
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import authconfigs
from corral.core import errors
from corral.core.auth import oidc_config, principals
from corral.core.auth.oidc_config import CALLBACK_PATH, LOGIN_PATH

PROVIDERS = [principals.LOCAL, principals.OIDC]

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


def fields(ask: Ask, provider: str) -> dict[str, Any]:
    if provider == principals.LOCAL:
        return {"id": "local", "name": "local", "enabled": True}
    config = authconfigs.stored(ask.deps)
    return {
        "id": principals.OIDC, "name": principals.OIDC, "enabled": config.enabled,
        "issuer": config.issuer, "clientId": config.client_id, "scope": config.scope,
        "groupsClaim": config.groups_claim, "redirectUri": ask.deps.external_url + CALLBACK_PATH,
    }  # fmt: skip


async def update(ask: Ask, provider: str, body: dict[str, Any]) -> str:
    await authconfigs.update(ask.deps, body)
    return provider


FAMILY = Family[str](
    schema=SCHEMA,
    # For administrators only: anyone else finds an empty collection, as in Rancher.
    listed=lambda ask: PROVIDERS if ask.who.is_admin else [],
    find=lambda ask, provider: provider if provider in PROVIDERS and ask.who.is_admin else None,
    fields=fields,
    ident=lambda provider: provider,
    actions=lambda ask, provider: sorted(ACTIONS) if provider == principals.OIDC else [],
    # The local provider has nothing to configure: no update link.
    methods=lambda ask, provider: ("GET",) if provider == principals.LOCAL else ("GET", "PUT"),
    before_update=lambda ask, provider: authconfigs.may_configure(provider),
    update=update,
    body_limit=AUTH_LIMIT,
)
routes = handlers.routes(FAMILY)


@routes.post(v3("authconfigs", "/{id}"))
async def config_action(request: web.Request) -> web.Response:
    name = action(request, ACTIONS)
    asked, provider = await handlers.found(FAMILY, request)
    if provider != principals.OIDC or name is None:
        raise errors.Unsupported("POST on an authConfig needs ?action= of oidc")
    inputs = {"configureTest": SCHEMA, "testAndApply": APPLY_INPUT}
    body = await read_input(request, inputs.get(name, name), AUTH_LIMIT)
    if name == "configureTest":
        metadata = await authconfigs.try_config(asked.deps, body)
        return web.json_response({
            "type": TEST_OUTPUT.id, "baseType": TEST_OUTPUT.id,
            "redirectUrl": asked.deps.external_url + LOGIN_PATH,
            "issuer": metadata.get("issuer", ""),
            "authorizationEndpoint": metadata.get("authorization_endpoint", ""),
            "tokenEndpoint": metadata.get("token_endpoint", ""),
            "jwksUri": metadata.get("jwks_uri", ""),
        })  # fmt: skip
    if name == "disable":
        await authconfigs.disable(asked.deps)
    else:
        await authconfigs.test_and_apply(asked.deps, body)
    return web.json_response(FAMILY.render(asked, principals.OIDC))
