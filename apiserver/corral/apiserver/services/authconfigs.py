"""The OpenID Connect provider's configuration: tried before it is stored enabled, so a
provider cannot be enabled in a state where no one could sign in. The client secret is kept
in the Secret svc-system/oidcconfig-clientsecret and proven only by the first code exchange
(nothing else uses it)."""

from __future__ import annotations

from typing import Any

from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import Deps
from corral.core import errors, settings
from corral.core.auth import oidc_config, principals
from corral.core.auth.oidc_config import OidcConfig
from corral.core.kube import kinds, oidc_secrets
from corral.core.kube.client import as_dict
from corral.core.oidc.provider import Provider, ProviderError


def stored(deps: Deps) -> OidcConfig:
    return OidcConfig.from_object(deps.stores.authconfigs.get(principals.OIDC))


def may_configure(provider: str) -> None:
    if provider != principals.OIDC:
        raise errors.invalid("id", "the local provider has nothing to configure", "InvalidAction")


async def update(deps: Deps, body: dict[str, Any]) -> None:
    """The fields given over the stored ones (a PUT merges)."""
    await _save(deps, body, _merged(deps, body))


async def disable(deps: Deps) -> None:
    """Stops sign-ins through the provider; every token its sign-ins made stops working."""
    await _save(deps, {}, oidc_config.merged(stored(deps), {"enabled": False}))


async def try_config(deps: Deps, body: dict[str, Any]) -> dict[str, Any]:
    """`configureTest`: the stored configuration with the body's fields over it, tried and
    not saved; the issuer's discovery document."""
    return await _test(_merged(deps, body), await _client_secret(deps, body))


async def test_and_apply(deps: Deps, body: dict[str, Any]) -> None:
    """`testAndApply`: `{"oidcConfig": {...}, "enabled": true}`, saved only if good."""
    given = body.get("oidcConfig")
    if not isinstance(given, dict):
        raise errors.missing("oidcConfig")
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise errors.invalid("enabled", "enabled must be true or false")
    await _save(deps, given, _merged(deps, {**given, "enabled": enabled}))


def _merged(deps: Deps, body: dict[str, Any]) -> OidcConfig:
    allowed = deps.stores.enabled(settings.LINK_LOCAL_SETTING)
    return oidc_config.merged(stored(deps), body, allowed)


async def _client_secret(deps: Deps, body: dict[str, Any]) -> str | None:
    if body.get("clientSecret") is not None:
        return oidc_config.check_client_secret(body["clientSecret"])
    return await oidc_secrets.read_client_secret(deps.kube)


async def _test(config: OidcConfig, secret: str | None) -> dict[str, Any]:
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


async def _save(deps: Deps, body: dict[str, Any], config: OidcConfig) -> None:
    """Stores the configuration (and a new client secret), after trying it when it would be
    enabled; nothing is stored when the try fails."""
    secret = await _client_secret(deps, body)
    if config.enabled:
        await _test(config, secret)
    if body.get("clientSecret") is not None and secret is not None:
        await oidc_secrets.store_client_secret(deps.kube, secret)
    applied = await deps.kube.apply(
        kinds.AuthConfig(metadata=ObjectMeta(name=principals.OIDC), spec=config.spec()),
        force=True,
    )
    deps.stores.authconfigs.put(as_dict(applied))
