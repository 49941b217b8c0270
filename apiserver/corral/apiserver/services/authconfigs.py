"""The sign-in providers' configurations: `oidc` and `keycloakoidc` (one OpenID Connect
implementation, parameterised by the provider id) and `github`. Each is tried before it is
stored enabled, so a provider cannot be enabled in a state where no one could sign in. A
client secret is kept in the Secret svc-system/<provider>config-clientsecret, never returned.

A field of another provider's configuration (`hostname` given to `oidc`) is 422 naming it,
never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import Deps
from corral.core import errors, settings
from corral.core.auth import github_config, oidc_config, principals
from corral.core.auth.github_config import GithubConfig
from corral.core.auth.oidc_config import OidcConfig
from corral.core.auth.principals import Identity
from corral.core.github.client import CodeRefused, CredentialsRefused, Github, GithubError
from corral.core.kube import kinds, oidc_secrets
from corral.core.kube.client import as_dict
from corral.core.oidc.provider import Provider, ProviderError

CONFIGURABLE = (*principals.OIDC_PROVIDERS, principals.GITHUB)
OIDC_FIELDS = frozenset({"issuer", "clientId", "clientSecret", "scope", "groupsClaim", "enabled"})
GITHUB_FIELDS = frozenset({"hostname", "tls", "clientId", "clientSecret", "enabled",
                           "accessMode", "allowedPrincipalIds", "certificate"})  # fmt: skip
# What every provider's resource shows but no one sets: sent back by clients that PUT what
# they read, never an error.
SHOWN = frozenset({"redirectUri", "redirectUrl"})
# What decides whether anyone can sign in through GitHub: changed only by testAndApply once
# the provider is enabled, since a code is the one way to try it.
GITHUB_CONNECTION = ("hostname", "tls", "clientId", "certificate")
MAX_CODE = 4096


def stored(deps: Deps, provider: str) -> OidcConfig:
    return OidcConfig.from_object(deps.stores.authconfigs.get(provider), provider)


def stored_github(deps: Deps) -> GithubConfig:
    return GithubConfig.from_object(deps.stores.authconfigs.get(principals.GITHUB))


def may_configure(provider: str) -> None:
    if provider not in CONFIGURABLE:
        raise errors.invalid("id", "the local provider has nothing to configure", "InvalidAction")


async def update(deps: Deps, provider: str, body: dict[str, Any]) -> None:
    """The fields given over the stored ones (a PUT merges)."""
    if provider == principals.GITHUB:
        await _save_github(deps, body, await _untried_github(deps, body))
    else:
        await _save(deps, body, _merged(deps, provider, body))


async def disable(deps: Deps, provider: str) -> None:
    """Stops sign-ins through the provider; every token its sign-ins made stops working."""
    if provider == principals.GITHUB:
        off = GithubConfig.from_object({"spec": {**stored_github(deps).spec(), "enabled": False}})
        await _apply(deps, provider, off.spec())
    else:
        await _save(deps, {}, oidc_config.merged(stored(deps, provider), {"enabled": False}))


async def try_config(deps: Deps, provider: str, body: dict[str, Any]) -> dict[str, Any]:
    """`configureTest` of an OpenID Connect provider: the stored configuration with the
    body's fields over it, tried and not saved; the issuer's discovery document."""
    merged = _merged(deps, provider, body)
    return await _test(merged, await _client_secret(deps, provider, body))


def try_github(deps: Deps, body: dict[str, Any], redirect_uri: str) -> str:
    """`configureTest` of GitHub: the authorize URL of the stored configuration with the
    body's fields over it, where an administrator gets the code testAndApply needs."""
    config = _merged_github(deps, body)
    if not config.client_id:
        raise errors.missing("clientId")
    query = urlencode({"client_id": config.client_id, "redirect_uri": redirect_uri,
                       "scope": github_config.SCOPE})  # fmt: skip
    return f"{config.web_url}/login/oauth/authorize?{query}"


async def test_and_apply(deps: Deps, provider: str, body: dict[str, Any]) -> None:
    """`testAndApply` of an OpenID Connect provider: `{"oidcConfig": {...}, "enabled":
    true}` (the same for keycloakoidc, as in Rancher), saved only if good."""
    given = _config_of(body, "oidcConfig")
    enabled = _enabled_of(body)
    await _save(deps, given, _merged(deps, provider, {**given, "enabled": enabled}))


async def test_and_apply_github(deps: Deps, body: dict[str, Any], redirect_uri: str) -> None:
    """`testAndApply` of GitHub: `{"githubConfig": {...}, "code": "...", "enabled": true}`.
    The code (from the authorize page configureTest named) is exchanged and the user read,
    which proves the client id, the client secret, the host and its certificate; the user who
    tested is added to `allowedPrincipalIds` unless access is unrestricted, so whoever enables
    a restricted provider can still sign in through it. Nothing is saved when a step fails."""
    given = _config_of(body, "githubConfig")
    code = body.get("code")
    if not isinstance(code, str) or not code:
        raise errors.missing("code")
    if len(code) > MAX_CODE:
        raise errors.invalid("code", f"code must be at most {MAX_CODE} characters")
    config = _merged_github(deps, {**given, "enabled": _enabled_of(body)})
    if not config.client_id:
        raise errors.missing("clientId")
    secret = await _github_secret(deps, given)
    if secret is None:
        raise errors.missing("clientSecret")
    identity = await _tried_github(Github(config, secret), code, redirect_uri)
    tester = principals.user_principal(principals.GITHUB, identity.subject)
    if config.access_mode != github_config.UNRESTRICTED:
        allowed = (*config.allowed_principal_ids, tester)
        config = github_config.merged(config, {"allowedPrincipalIds": list(dict.fromkeys(allowed))})
    await _save_github(deps, given, config)


async def _untried_github(deps: Deps, body: dict[str, Any]) -> GithubConfig:
    """A PUT's configuration, when it needs no try: it neither enables GitHub nor changes
    how an enabled one is reached (**422** `InvalidAction` naming the field otherwise)."""
    config, current = _merged_github(deps, body), stored_github(deps)
    if config.enabled and not current.enabled:
        raise errors.invalid("enabled", "GitHub is enabled by testAndApply, which needs a "
                             "code from its authorize page", "InvalidAction")  # fmt: skip
    if not config.enabled:
        return config
    now, before = config.spec(), current.spec()
    changed = [f for f in GITHUB_CONNECTION if now[f] != before[f]]
    if body.get("clientSecret") is not None:
        kept = await oidc_secrets.read_client_secret(deps.kube, principals.GITHUB)
        if body["clientSecret"] != kept:
            changed.append("clientSecret")
    if changed:
        why = f"{changed[0]} of an enabled GitHub provider changes only through testAndApply"
        raise errors.invalid(changed[0], why, "InvalidAction")
    return config


async def _tried_github(client: Github, code: str, redirect_uri: str) -> Identity:
    try:
        return await client.identity(await client.exchange(code, redirect_uri, None))
    except CodeRefused as exc:
        raise errors.invalid("code", str(exc), "InvalidBodyContent") from None
    except CredentialsRefused as exc:
        raise errors.invalid("clientSecret", str(exc), "InvalidBodyContent") from None
    except GithubError as exc:
        raise errors.invalid("hostname", str(exc), "InvalidBodyContent") from None


def _config_of(body: dict[str, Any], key: str) -> dict[str, Any]:
    given = body.get(key)
    if not isinstance(given, dict):
        raise errors.missing(key)
    return given


def _enabled_of(body: dict[str, Any]) -> bool:
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise errors.invalid("enabled", "enabled must be true or false")
    return enabled


def _foreign(body: Mapping[str, Any], own: frozenset[str]) -> None:
    """422 naming the first field this provider does not have."""
    for field in sorted(set(body) - own - SHOWN):
        if body[field] is not None:
            raise errors.invalid(field, f"{field} is not a field of this provider")


def _merged(deps: Deps, provider: str, body: dict[str, Any]) -> OidcConfig:
    _foreign(body, OIDC_FIELDS)
    allowed = deps.stores.enabled(settings.LINK_LOCAL_SETTING)
    return oidc_config.merged(stored(deps, provider), body, allowed)


def _merged_github(deps: Deps, body: dict[str, Any]) -> GithubConfig:
    _foreign(body, GITHUB_FIELDS)
    allowed = deps.stores.enabled(settings.LINK_LOCAL_SETTING)
    return github_config.merged(stored_github(deps), body, allowed)


async def _client_secret(deps: Deps, provider: str, body: Mapping[str, Any]) -> str | None:
    if body.get("clientSecret") is not None:
        return oidc_config.check_client_secret(body["clientSecret"])
    return await oidc_secrets.read_client_secret(deps.kube, provider)


async def _github_secret(deps: Deps, body: Mapping[str, Any]) -> str | None:
    return await _client_secret(deps, principals.GITHUB, body)


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


async def _save(deps: Deps, body: Mapping[str, Any], config: OidcConfig) -> None:
    """Stores the configuration (and a new client secret), after trying it when it would be
    enabled; nothing is stored when the try fails."""
    secret = await _client_secret(deps, config.provider, body)
    if config.enabled:
        await _test(config, secret)
    if body.get("clientSecret") is not None and secret is not None:
        await oidc_secrets.store_client_secret(deps.kube, config.provider, secret)
    await _apply(deps, config.provider, config.spec())


async def _save_github(deps: Deps, body: Mapping[str, Any], config: GithubConfig) -> None:
    secret = await _github_secret(deps, body)
    if config.enabled and secret is None:
        raise errors.missing("clientSecret")
    if body.get("clientSecret") is not None and secret is not None:
        await oidc_secrets.store_client_secret(deps.kube, principals.GITHUB, secret)
    await _apply(deps, principals.GITHUB, config.spec())


async def _apply(deps: Deps, provider: str, spec: dict[str, Any]) -> None:
    applied = await deps.kube.apply(
        kinds.AuthConfig(metadata=ObjectMeta(name=provider), spec=spec), force=True
    )
    deps.stores.authconfigs.put(as_dict(applied))
