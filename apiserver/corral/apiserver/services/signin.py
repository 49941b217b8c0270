"""Sign-in through the OpenID Connect provider: the configured provider, and what a confirmed
identity becomes in corral.

A user is known by the provider's subject (principal `oidc_user://<sub>`). At the first
sign-in a User is made for them, named from that principal (`u-` and 10 characters of its
hash), so two replicas finishing the first sign-ins of one person at once make one User
(Kubernetes refuses the second). Every sign-in records the groups the provider named
(UserAttribute) and stores the refresh token in the user's provider Secret (spec 2.2).
"""

from __future__ import annotations

import datetime
import logging

from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import Deps
from corral.core import errors
from corral.core.api import ids, names
from corral.core.auth import principals
from corral.core.auth.oidc_config import OidcConfig
from corral.core.kube import kinds, oidc_secrets, provider_secrets, user_attributes
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.oidc.provider import Identity, Provider

log = logging.getLogger(__name__)


async def enabled_provider(deps: Deps) -> Provider:
    """The provider, when an administrator enabled it; 404 otherwise, as for a provider that
    does not exist."""
    config = OidcConfig.from_object(deps.stores.authconfigs.get(principals.OIDC))
    if not config.enabled:
        raise errors.not_found("authProvider oidc not found")
    secret = await oidc_secrets.read_client_secret(deps.kube)
    if secret is None:
        raise errors.Unavailable(
            "the oidc provider has no client secret", code="ProviderUnavailable"
        )
    return deps.providers.get(config, secret)


async def user_for(deps: Deps, identity: Identity) -> Obj:
    """The user the identity is, made at their first sign-in; refreshed groups and refresh
    token recorded. 403 for a disabled user, as local sign-in answers."""
    kube, stores = deps.kube, deps.stores
    principal = principals.user_principal(principals.OIDC, identity.subject)
    user = stores.user_by_principal(principal) or await _make_user(deps, principal, identity)
    user_id, uid = user["metadata"]["name"], user["metadata"]["uid"]
    active = stores.user_active(user_id)
    if active is None:
        raise errors.conflict(f"user {user_id} is being deleted; sign in again later")
    if not active:
        raise errors.forbidden("user is disabled")
    now = datetime.datetime.now(datetime.UTC)
    recorded = await user_attributes.record_groups(
        kube, user_id, uid, principals.OIDC, identity.groups, now
    )
    stores.user_attributes.put(recorded)
    if identity.refresh_token:
        await provider_secrets.store(kube, user_id, uid, principals.OIDC, identity.refresh_token)
    log.info("user %s signed in through oidc with %d groups", user_id, len(identity.groups))
    return user


async def _make_user(deps: Deps, principal: str, identity: Identity) -> Obj:
    kube, stores = deps.kube, deps.stores
    user_id = ids.derived("u", principal, length=10)
    user = kinds.User(
        metadata=ObjectMeta(name=user_id, labels={names.LABEL_AUTH_PROVIDER: principals.OIDC}),
        spec={"displayName": identity.display_name, "principalIds": [principal],
              "enabled": True},
    )  # fmt: skip
    try:
        made = as_dict(await kube.create(user))
    except KubeApiError as exc:
        if exc.status.code != 409:
            raise
        made = as_dict(await kube.get(kinds.User, user_id))  # made by another replica
    stores.users.put(made)
    binding = kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ids.derived("grb", user_id, "user")),
        spec={"globalRoleName": "user", "userName": user_id},
    )
    try:
        stores.bindings.put(as_dict(await kube.create(binding)))
    except KubeApiError as exc:
        if exc.status.code != 409:
            raise
    return made
