"""Group sync: every `auth-group-sync-interval-minutes`, each user who signed in through a
provider has their groups refreshed with the credential in their provider Secret (spec 2.2):
OpenID Connect's (`oidc`, `keycloakoidc`) refresh token, GitHub's access token (organisations
and teams read again). So a user the provider drops from a group loses what that group's
bindings gave them at the next pass.

Runs on the active operator replica only (kopf peering), like the token purge: one refresh
per user per pass, never two replicas racing to use one refresh token. For each user:

- the provider answers: the new groups are recorded (UserAttribute) and a rotated refresh
  token replaces the old one in the Secret;
- the provider refuses the credential (`invalid_grant`; GitHub's 401: the user was disabled
  there, revoked the app) or there is none: their groups are cleared and the dead credential
  removed, since nothing can confirm them any more;
- the provider cannot be reached: nothing changes, the next pass tries again.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient

from corral.core import settings
from corral.core.api import names
from corral.core.auth import id_tokens, principals
from corral.core.auth.github_config import GithubConfig
from corral.core.auth.oidc_config import OidcConfig
from corral.core.auth.principals import Identity
from corral.core.github.client import Clients, GithubError, TokenRefused
from corral.core.kube import kinds, oidc_secrets, provider_secrets, user_attributes
from corral.core.kube.client import as_dict
from corral.core.oidc.provider import GrantRefused, ProviderError, Providers
from corral.operator.state import State

log = logging.getLogger(__name__)

SYNC_SETTING = "auth-group-sync-interval-minutes"
TICK_SECONDS = 2.0
# Refreshes in flight at once: the provider is someone else's service.
CONCURRENCY = 4
# A provider's answer for a stored credential and the subject it must still be.
Confirm = Callable[[str, str], Awaitable[Identity]]
# The provider refused the credential: the user's groups can no longer be confirmed.
REFUSED = (GrantRefused, id_tokens.InvalidIdToken, TokenRefused)
# The provider cannot be used now: the next pass tries again.
UNAVAILABLE = (ProviderError, GithubError)


@kopf.daemon(names.GROUP, names.VERSION, names.SETTING.plural,
             when=lambda name, **_: name == SYNC_SETTING)  # fmt: skip
async def sync_groups(
    stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **_: Any
) -> None:
    """Every interval, re-read from the setting on each tick (as the token purge does)."""
    state: State = memo.state
    providers, github = Providers(), Clients()
    last = -math.inf
    while not stopped:
        if time.monotonic() - last >= interval_seconds(body):
            try:
                await sync(state.kube, providers, github, state.clock())
            except Exception:
                log.exception("group sync pass failed")  # the next interval tries again
            last = time.monotonic()
        await stopped.wait(TICK_SECONDS)


def interval_seconds(setting: Mapping[str, Any]) -> float:
    return settings.number(SYNC_SETTING, setting) * 60


async def sync(
    kube: AsyncClient, providers: Providers, github: Clients, now: datetime.datetime
) -> int:
    """One pass over every provider's users; how many had their groups refreshed."""
    done = 0
    for provider in principals.OIDC_PROVIDERS:
        config = OidcConfig.from_object(await _config(kube, provider), provider)
        secret = await oidc_secrets.read_client_secret(kube, provider)
        if config.enabled and secret is not None:
            found = providers.get(config, secret)
            done += await _sync_provider(kube, provider, found.refresh, now)
    github_config = GithubConfig.from_object(await _config(kube, principals.GITHUB))
    secret = await oidc_secrets.read_client_secret(kube, principals.GITHUB)
    if github_config.enabled and secret is not None:
        client = github.get(github_config, secret)
        done += await _sync_provider(kube, principals.GITHUB, client.identity, now)
    # A disabled provider's tokens no longer authenticate: its users' groups do not matter.
    return done


async def _config(kube: AsyncClient, provider: str) -> dict[str, Any] | None:
    try:
        return as_dict(await kube.get(kinds.AuthConfig, provider))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise


async def _sync_provider(
    kube: AsyncClient, provider: str, confirm: Confirm, now: datetime.datetime
) -> int:
    users = [
        as_dict(u)
        async for u in kube.list(kinds.User, labels={names.LABEL_AUTH_PROVIDER: provider})
    ]
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(user: dict[str, Any]) -> bool:
        async with limit:
            return await sync_user(kube, provider, confirm, user, now)

    done = sum(await asyncio.gather(*(one(u) for u in users)))
    log.info("group sync: %d of %d %s users refreshed", done, len(users), provider)
    return done


async def sync_user(
    kube: AsyncClient,
    provider: str,
    confirm: Confirm,
    user: dict[str, Any],
    now: datetime.datetime,
) -> bool:
    meta, spec = user["metadata"], user.get("spec") or {}
    user_id, uid = meta["name"], meta["uid"]
    prefix = principals.user_principal(provider, "")
    subject = next((p[len(prefix) :] for p in spec.get("principalIds") or []
                    if p.startswith(prefix)), None)  # fmt: skip
    if subject is None or meta.get("deletionTimestamp") or spec.get("enabled") is False:
        return False
    credential = await provider_secrets.read(kube, user_id, provider)
    try:
        if credential is None:
            raise GrantRefused("no credential stored")
        identity = await confirm(credential, subject)
    except REFUSED as exc:
        log.warning("user %s: groups cleared, the provider's answer is gone: %s", user_id, exc)
        await user_attributes.record_groups(kube, user_id, uid, provider, [], now)
        await provider_secrets.remove(kube, user_id, provider)
        return False
    except UNAVAILABLE as exc:
        log.warning("user %s: groups kept, the provider cannot be used: %s", user_id, exc)
        return False
    # The rotated credential first: the provider may have revoked the old one, and a pass
    # stopped between the two writes must not leave only that; the groups are written again
    # by the next pass anyway.
    if identity.credential and identity.credential != credential:
        await provider_secrets.store(kube, user_id, uid, provider, identity.credential)
    await user_attributes.record_groups(kube, user_id, uid, provider, identity.groups, now)
    return True
