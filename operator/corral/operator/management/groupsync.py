"""Group sync: every `auth-group-sync-interval-minutes`, each user who signed in through the
OpenID Connect provider has their groups refreshed with the refresh token in their provider
Secret (spec 2.2), so a user the provider drops from a group loses what that group's bindings
gave them at the next pass.

Runs on the active operator replica only (kopf peering), like the token purge: one refresh
per user per pass, never two replicas racing to use one refresh token. For each user:

- the provider answers: the new groups are recorded (UserAttribute) and a rotated refresh
  token replaces the old one in the Secret;
- the provider refuses the refresh token (`invalid_grant`: the user was disabled there, their
  session revoked) or there is none: their groups are cleared and the dead token removed,
  since nothing can confirm them any more;
- the provider cannot be reached: nothing changes, the next pass tries again.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient

from corral.core import settings
from corral.core.api import names
from corral.core.auth import id_tokens, principals
from corral.core.auth.oidc_config import OidcConfig
from corral.core.kube import kinds, oidc_secrets, provider_secrets, user_attributes
from corral.core.kube.client import as_dict
from corral.core.oidc.provider import GrantRefused, Provider, ProviderError, Providers
from corral.operator.state import State

log = logging.getLogger(__name__)

SYNC_SETTING = "auth-group-sync-interval-minutes"
TICK_SECONDS = 2.0
# Refreshes in flight at once: the provider is someone else's service.
CONCURRENCY = 4


@kopf.daemon(names.GROUP, names.VERSION, names.SETTING.plural,
             when=lambda name, **_: name == SYNC_SETTING)  # fmt: skip
async def sync_groups(
    stopped: kopf.DaemonStopped, memo: kopf.Memo, body: kopf.Body, **_: Any
) -> None:
    """Every interval, re-read from the setting on each tick (as the token purge does)."""
    state: State = memo.state
    providers = Providers()
    last = -math.inf
    while not stopped:
        if time.monotonic() - last >= interval_seconds(body):
            try:
                await sync(state.kube, providers, state.clock())
            except Exception:
                log.exception("group sync pass failed")  # the next interval tries again
            last = time.monotonic()
        await stopped.wait(TICK_SECONDS)


def interval_seconds(setting: Mapping[str, Any]) -> float:
    return settings.number(SYNC_SETTING, setting) * 60


async def sync(kube: AsyncClient, providers: Providers, now: datetime.datetime) -> int:
    """One pass over the provider's users; how many had their groups refreshed."""
    try:
        config = OidcConfig.from_object(as_dict(await kube.get(kinds.AuthConfig, "oidc")))
    except ApiError as exc:
        if exc.status.code == 404:
            return 0
        raise
    secret = await oidc_secrets.read_client_secret(kube)
    if not config.enabled or secret is None:
        return 0  # tokens of a disabled provider no longer authenticate: groups do not matter
    provider = providers.get(config, secret)
    users = [
        as_dict(u)
        async for u in kube.list(kinds.User, labels={names.LABEL_AUTH_PROVIDER: principals.OIDC})
    ]
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(user: dict[str, Any]) -> bool:
        async with limit:
            return await sync_user(kube, provider, user, now)

    done = sum(await asyncio.gather(*(one(u) for u in users)))
    log.info("group sync: %d of %d oidc users refreshed", done, len(users))
    return done


async def sync_user(
    kube: AsyncClient, provider: Provider, user: dict[str, Any], now: datetime.datetime
) -> bool:
    meta, spec = user["metadata"], user.get("spec") or {}
    user_id, uid = meta["name"], meta["uid"]
    prefix = principals.user_principal(principals.OIDC, "")
    subject = next((p[len(prefix) :] for p in spec.get("principalIds") or []
                    if p.startswith(prefix)), None)  # fmt: skip
    if subject is None or meta.get("deletionTimestamp") or spec.get("enabled") is False:
        return False
    refresh_token = await provider_secrets.read(kube, user_id, principals.OIDC)
    try:
        if refresh_token is None:
            raise GrantRefused("no refresh token stored")
        identity = await provider.refresh(refresh_token, subject)
    except (GrantRefused, id_tokens.InvalidIdToken) as exc:
        log.warning("user %s: groups cleared, the provider's answer is gone: %s", user_id, exc)
        await user_attributes.record_groups(kube, user_id, uid, principals.OIDC, [], now)
        await provider_secrets.remove(kube, user_id, principals.OIDC)
        return False
    except ProviderError as exc:
        log.warning("user %s: groups kept, the provider cannot be used: %s", user_id, exc)
        return False
    await user_attributes.record_groups(kube, user_id, uid, principals.OIDC, identity.groups, now)
    if identity.refresh_token and identity.refresh_token != refresh_token:
        await provider_secrets.store(kube, user_id, uid, principals.OIDC, identity.refresh_token)
    return True
