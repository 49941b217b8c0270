"""An OpenID Connect provider as corral uses it, through authlib: discovery of its endpoints,
the authorization-code flow with PKCE (S256) and a nonce, the code exchange, ID token
validation against its JWKS, and refresh.

authlib's framework integrations (Starlette, Flask, Django) are its one piece that does
discovery and ID token parsing for a client; corral's server is aiohttp, so `_App` is that
integration's own composition (`AsyncOAuth2Mixin`, `AsyncOpenIDMixin`, `BaseApp`) without a
framework session: what the Starlette app keeps in its session, corral keeps in a sealed
cookie (`corral.core.auth.loginstate`). HTTP goes through authlib's httpx client, with
timeouts, never following redirects.

Nothing here logs a token, a code, a verifier or the client secret.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping
from typing import Any

from authlib.integrations.base_client import BaseApp, OAuthError
from authlib.integrations.base_client.async_app import AsyncOAuth2Mixin
from authlib.integrations.base_client.async_openid import AsyncOpenIDMixin
from authlib.integrations.httpx_client import AsyncOAuth2Client
from authlib.oidc.discovery import OpenIDProviderMetadata

from corral.core.auth import id_tokens, principals
from corral.core.auth.loginstate import LoginState
from corral.core.auth.oidc_config import OidcConfig
from corral.core.auth.principals import Identity

TIMEOUT_SECONDS = 10.0
# Discovery and keys are read again after this long (a key rotation is also noticed at once,
# by a token signed with a key the cached set lacks).
METADATA_MAX_AGE_SECONDS = 3600.0


class ProviderError(Exception):
    """The provider cannot be used: unreachable, misconfigured, or its answer is not what
    OpenID Connect allows. The message names the rule, never a secret."""


class GrantRefused(ProviderError):
    """The provider refused the code or the refresh token (`invalid_grant`): the user must
    sign in again; a refresh token it refused is dead."""


class _App(AsyncOAuth2Mixin, AsyncOpenIDMixin, BaseApp):
    client_cls = AsyncOAuth2Client  # type: ignore[assignment] # authlib declares it None


class Provider:
    """One configuration of the provider, with its discovered metadata and keys cached."""

    def __init__(self, config: OidcConfig, client_secret: str) -> None:
        self.config = config
        self._app = _App(
            framework=None,
            client_id=config.client_id,
            client_secret=client_secret,
            server_metadata_url=config.issuer.rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={
                "scope": config.scope,
                "code_challenge_method": "S256",
                "timeout": TIMEOUT_SECONDS,
                "follow_redirects": False,
            },
        )
        self._loaded: float | None = None  # when the metadata was read (monotonic)

    async def discover(self) -> dict[str, Any]:
        """The provider's metadata, checked: the issuer it names must be the one configured
        (OpenID Connect Discovery 4.3), and it must offer the code flow and a key set."""
        age = time.monotonic() - self._loaded if self._loaded is not None else math.inf
        if age > METADATA_MAX_AGE_SECONDS:
            self._app.server_metadata.clear()
            try:
                metadata = await self._app.load_server_metadata()
            except Exception as exc:  # noqa: BLE001 - transport, HTTP status or JSON: all say why
                raise ProviderError(f"discovery failed: {_why(exc)}") from None
            _check_metadata(metadata, self.config.issuer)
            self._loaded = time.monotonic()
        return dict(self._app.server_metadata)

    async def begin(self, redirect_uri: str, response_type: str) -> tuple[str, LoginState]:
        """The provider's authorization URL for a new sign-in, and what its end must know."""
        await self.discover()
        created = await self._app.create_authorization_url(redirect_uri)
        state = LoginState(
            state=created["state"],
            nonce=created["nonce"],
            code_verifier=created["code_verifier"],
            response_type=response_type,
        )
        return created["url"], state

    async def finish(self, code: str, login: LoginState, redirect_uri: str) -> Identity:
        """Exchanges the code (with the PKCE verifier) and validates the ID token against the
        nonce of this sign-in."""
        await self.discover()
        try:
            token = await self._app.fetch_access_token(
                redirect_uri=redirect_uri, code=code, code_verifier=login.code_verifier
            )
        except OAuthError as exc:
            raise _refusal(exc) from None
        except Exception as exc:  # noqa: BLE001 - transport errors say why
            raise ProviderError(f"code exchange failed: {_why(exc)}") from None
        return await self._identity(token, login.nonce)

    async def refresh(self, refresh_token: str, subject: str) -> Identity:
        """A new ID token (and groups) for the user the refresh token was issued to."""
        metadata = await self.discover()
        client = self._app._get_oauth_client(**metadata)
        try:
            async with client:
                token = await client.refresh_token(
                    metadata["token_endpoint"], refresh_token=refresh_token
                )
        except OAuthError as exc:
            raise _refusal(exc) from None
        except Exception as exc:  # noqa: BLE001 - transport errors say why
            raise ProviderError(f"refresh failed: {_why(exc)}") from None
        identity = await self._identity(token, None, keep_refresh=refresh_token)
        if identity.subject != subject:
            raise GrantRefused("the refreshed ID token names another subject")
        return identity

    async def _identity(
        self, token: Mapping[str, Any], nonce: str | None, keep_refresh: str | None = None
    ) -> Identity:
        claims = await self._claims(token, nonce)
        groups_claim = self.config.groups_claim
        if groups_claim not in claims and token.get("access_token"):
            claims = {**await self._userinfo(token, claims["sub"]), **claims}
        name = claims.get("name") or claims.get("preferred_username") or claims["sub"]
        return Identity(
            subject=claims["sub"],
            groups=principals.groups_of(claims, groups_claim, self.config.provider),
            display_name=name[:256] if isinstance(name, str) else claims["sub"],
            credential=token.get("refresh_token") or keep_refresh,
        )

    async def _claims(self, token: Mapping[str, Any], nonce: str | None) -> dict[str, Any]:
        expected = id_tokens.Expected(self.config.issuer, self.config.client_id, nonce)
        access = token.get("access_token")
        jwks = await self.keys(force=False)
        try:
            return id_tokens.validate(token.get("id_token"), jwks, expected, access)
        except id_tokens.UnknownKey:
            jwks = await self.keys(force=True)  # the provider may have rotated its keys
            return id_tokens.validate(token.get("id_token"), jwks, expected, access)

    async def keys(self, force: bool) -> Mapping[str, Any]:
        try:
            jwks: Mapping[str, Any] = await self._app.fetch_jwk_set(force=force)
        except Exception as exc:  # noqa: BLE001 - transport, HTTP status or JSON: all say why
            raise ProviderError(f"the provider's key set cannot be read: {_why(exc)}") from None
        return jwks

    async def _userinfo(self, token: Mapping[str, Any], subject: str) -> dict[str, Any]:
        """The UserInfo claims, when the ID token lacks the groups claim. They must be about
        the same subject (OpenID Connect Core 5.3.2), else they are ignored."""
        try:
            info = await self._app.userinfo(token=dict(token))
        except Exception:  # noqa: BLE001 - no UserInfo: the ID token's claims are all there is
            return {}
        return dict(info) if info.get("sub") == subject else {}


def _check_metadata(metadata: Mapping[str, Any], issuer: str) -> None:
    if metadata.get("issuer") != issuer:
        raise ProviderError(
            f"the provider names its issuer {str(metadata.get('issuer'))[:200]!r}, "
            f"not the configured {issuer!r}"
        )
    try:
        OpenIDProviderMetadata(metadata).validate()
    except Exception as exc:  # noqa: BLE001 - authlib raises ValueError with the rule broken
        raise ProviderError(f"the provider's metadata is not OpenID Connect's: {exc}") from None
    if "code" not in metadata.get("response_types_supported", []):
        raise ProviderError("the provider does not offer the authorization-code flow")
    methods = metadata.get("code_challenge_methods_supported")
    if methods is not None and "S256" not in methods:
        raise ProviderError("the provider does not offer PKCE with S256")


def _refusal(exc: OAuthError) -> ProviderError:
    error = str(getattr(exc, "error", "") or "")[:64]
    if error == "invalid_grant":
        return GrantRefused("the provider refused the grant (invalid_grant)")
    return ProviderError(f"the provider refused the request ({error or 'no error code'})")


def _why(exc: Exception) -> str:
    """The kind of failure and a short reason; never a request, which could hold secrets."""
    return f"{type(exc).__name__}: {str(exc)[:200]}"


class Providers:
    """The one Provider per provider id, configuration and client secret, so discovery and
    keys are fetched once, not per sign-in."""

    def __init__(self) -> None:
        self._current: dict[str, tuple[tuple[OidcConfig, str], Provider]] = {}

    def get(self, config: OidcConfig, client_secret: str) -> Provider:
        key = (config, hashlib.sha256(client_secret.encode()).hexdigest())
        held = self._current.get(config.provider)
        if held is None or held[0] != key:
            held = self._current[config.provider] = (key, Provider(config, client_secret))
        return held[1]
