"""Principal ids: who a provider says someone is, in Rancher's form `<provider>_user://<id>` and
`<provider>_group://<name>` (GitHub's groups are `github_org://<id>` and `github_team://<id>`),
the groups a provider's claims put a user in, and what a confirmed sign-in tells corral.

A group principal is what a role binding names (`groupPrincipalId`) and what the proxy
impersonates downstream (`Impersonate-Group`): the provider's prefix keeps a group a provider
calls `system:masters` from ever being Kubernetes' own.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.errors import Invalid

log = logging.getLogger(__name__)

LOCAL = "local"
OIDC = "oidc"
# Keycloak's OpenID Connect provider: the same flow as `oidc`, its own configuration,
# principals and provider-secret entry (spec 2.2's `<vendor>oidc`).
KEYCLOAK_OIDC = "keycloakoidc"
OIDC_PROVIDERS = (OIDC, KEYCLOAK_OIDC)
GITHUB = "github"
GITHUB_ORG = "github_org://"
GITHUB_TEAM = "github_team://"
# What a binding's group principal may start with: a group of a provider that has groups.
GROUP_PREFIXES = (*(f"{p}_group://" for p in OIDC_PROVIDERS), GITHUB_ORG, GITHUB_TEAM)

# What a user's record keeps: bounded, so one claim cannot make an object Kubernetes refuses.
MAX_GROUPS = 512
MAX_NAME = 256
# Visible characters and spaces (group names such as "Platform Team" are common); no control
# characters, which would reach HTTP headers through impersonation.
_NAME = re.compile(rf"[^\x00-\x1f\x7f]{{1,{MAX_NAME}}}")


def user_principal(provider: str, subject: str) -> str:
    return f"{provider}_user://{subject}"


def group_principal(provider: str, name: str) -> str:
    return f"{provider}_group://{name}"


def is_group_principal(value: str) -> bool:
    """A well-formed group principal of a provider that has groups."""
    for prefix in GROUP_PREFIXES:
        if value.startswith(prefix) and _NAME.fullmatch(value[len(prefix) :]):
            return True
    return False


def check_group_principal(value: Any, field: str = "groupPrincipalId") -> str:
    if not isinstance(value, str) or not is_group_principal(value):
        raise Invalid(
            f"{field} must be {group_principal(OIDC, '<group>')} (or the group of another "
            f"provider: {', '.join(GROUP_PREFIXES)}), the group at most {MAX_NAME} characters",
            field,
        )
    return value


def check_subject(subject: Any) -> str:
    """The `sub` claim: the provider's stable id of the user (OpenID Connect Core 2: at most
    255 ASCII characters)."""
    if not isinstance(subject, str) or not 0 < len(subject) <= 255 or not subject.isascii():
        raise Invalid("the ID token's sub claim is not a subject identifier", "sub")
    if not subject.isprintable():
        raise Invalid("the ID token's sub claim is not a subject identifier", "sub")
    return subject


def groups_of(claims: Mapping[str, Any], claim: str, provider: str) -> list[str]:
    """The group principals named by `claims[claim]`: a list of names (or one name). Names
    that cannot be a group (not text, too long, control characters) are left out, and beyond
    MAX_GROUPS the rest is dropped, both logged by count only."""
    value = claims.get(claim)
    names: Iterable[Any] = [value] if isinstance(value, str) else value or []
    if not isinstance(names, list):
        log.warning("the %s claim is neither a list nor a name: no groups read", claim)
        return []
    kept = sorted({n for n in names if isinstance(n, str) and _NAME.fullmatch(n)})
    if len(kept) != len(names) or len(kept) > MAX_GROUPS:
        dropped = len(names) - min(len(kept), MAX_GROUPS)
        log.warning("%d of %d groups in the %s claim left out", dropped, len(names), claim)
    return [group_principal(provider, n) for n in kept[:MAX_GROUPS]]


@dataclass(frozen=True)
class Identity:
    """Who a provider confirmed signed in, and the credential the user's provider secret keeps
    for group sync (spec 2.2): OpenID Connect's refresh token, GitHub's access token."""

    subject: str
    groups: list[str]  # group principals
    display_name: str
    credential: str | None = field(repr=False)
