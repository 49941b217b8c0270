"""Sign-in through a provider (`oidc`, `keycloakoidc`, `github`): the configured provider,
and what a confirmed identity becomes in corral.

A user is known by the provider's subject (principal `<provider>_user://<sub>`). At the first
sign-in a User is made for them, named from that principal (`u-` and 10 characters of its
hash), so two replicas finishing the first sign-ins of one person at once make one User
(Kubernetes refuses the second). Every sign-in records the groups the provider named
(UserAttribute) and stores the provider's credential (OpenID Connect's refresh token,
GitHub's access token) in the user's provider Secret under the provider id (spec 2.2).
"""

from __future__ import annotations

import datetime
import logging

from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import Deps
from corral.core import errors
from corral.core.api import ids, names
from corral.core.auth import github_config, principals
from corral.core.auth.github_config import GithubConfig
from corral.core.auth.oidc_config import OidcConfig
from corral.core.auth.principals import Identity
from corral.core.github.client import Github
from corral.core.kube import kinds, oidc_secrets, provider_secrets, user_attributes
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.oidc.provider import Provider

log = logging.getLogger(__name__)


async def enabled_provider(deps: Deps, provider: str) -> Provider:
    """The OpenID Connect provider, when an administrator enabled it; 404 otherwise, as for a
    provider that does not exist."""
    config = OidcConfig.from_object(deps.stores.authconfigs.get(provider), provider)
    if not config.enabled:
        raise errors.not_found(f"authProvider {provider} not found")
    return deps.providers.get(config, await _client_secret(deps, provider))


async def enabled_github(deps: Deps) -> Github:
    """GitHub, when an administrator enabled it; 404 otherwise."""
    config = GithubConfig.from_object(deps.stores.authconfigs.get(principals.GITHUB))
    if not config.enabled:
        raise errors.not_found(f"authProvider {principals.GITHUB} not found")
    return deps.github.get(config, await _client_secret(deps, principals.GITHUB))


async def _client_secret(deps: Deps, provider: str) -> str:
    secret = await oidc_secrets.read_client_secret(deps.kube, provider)
    if secret is None:
        raise errors.Unavailable(
            f"the {provider} provider has no client secret", code="ProviderUnavailable"
        )
    return secret


def admit_github(deps: Deps, config: GithubConfig, identity: Identity) -> None:
    """403 for a GitHub user the access mode keeps out (`required`, `restricted`)."""
    principal = principals.user_principal(principals.GITHUB, identity.subject)
    stores = deps.stores
    known = stores.user_by_principal(principal)
    user_id = known["metadata"]["name"] if known else None

    def member() -> bool:
        bindings = (stores.project_bindings, stores.cluster_bindings)
        if user_id is not None and any(b.by_index("user", user_id) for b in bindings):
            return True
        return any(b.by_index("group", g) for g in identity.groups for b in bindings)

    restricted = config.access_mode == github_config.RESTRICTED
    if not github_config.admits(config, [principal, *identity.groups], restricted and member()):
        raise errors.forbidden("this GitHub user is not allowed to sign in")


async def user_for(deps: Deps, provider: str, identity: Identity) -> Obj:
    """The user the identity is, made at their first sign-in; groups and the provider's
    credential recorded. 403 for a disabled user, as local sign-in answers."""
    kube, stores = deps.kube, deps.stores
    principal = principals.user_principal(provider, identity.subject)
    user = stores.user_by_principal(principal) or await _make_user(
        deps, provider, principal, identity
    )
    user_id, uid = user["metadata"]["name"], user["metadata"]["uid"]
    active = stores.user_active(user_id)
    if active is None:
        raise errors.conflict(f"user {user_id} is being deleted; sign in again later")
    if not active:
        raise errors.forbidden("user is disabled")
    now = datetime.datetime.now(datetime.UTC)
    recorded = await user_attributes.record_groups(
        kube, user_id, uid, provider, identity.groups, now
    )
    stores.user_attributes.put(recorded)
    if identity.credential:
        await provider_secrets.store(kube, user_id, uid, provider, identity.credential)
    log.info("user %s signed in through %s with %d groups", user_id, provider,
             len(identity.groups))  # fmt: skip
    return user


async def _make_user(deps: Deps, provider: str, principal: str, identity: Identity) -> Obj:
    kube, stores = deps.kube, deps.stores
    user_id = ids.derived("u", principal, length=10)
    user = kinds.User(
        metadata=ObjectMeta(
            name=user_id,
            labels={names.LABEL_AUTH_PROVIDER: provider},
            finalizers=[names.FINALIZER_OPERATOR],
        ),
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
