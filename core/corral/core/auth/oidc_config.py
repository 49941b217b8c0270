"""An OpenID Connect provider's configuration, as an administrator gives it and as its
AuthConfig (`oidc` or `keycloakoidc`) stores it (the client secret apart, in a Secret), each
field checked. The two providers are one implementation: the provider id names the AuthConfig,
the sign-in paths, the principals and the provider-secret entry.

The issuer is an `https` URL. Plain `http` is accepted only on a loopback address, where
nothing travels over a network (a provider run beside corral for tests or a demo). It is no
link-local or cloud metadata address (core/api/addresses.py) unless the setting
allow-link-local-endpoints says so: corral fetches its discovery document and keys.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from corral.core.api import addresses
from corral.core.auth.principals import KEYCLOAK_OIDC, OIDC
from corral.core.errors import Invalid

DEFAULT_SCOPE = "openid profile email"
DEFAULT_GROUPS_CLAIM = "groups"
MAX_URL = 1024
MAX_SECRET = 1024
# Rancher's public type of each provider, which names its `/v3-public` collection.
PUBLIC_TYPES = {OIDC: "oidcProvider", KEYCLOAK_OIDC: "keycloakOIDCProvider"}
# Rancher's type of each provider's configuration (`/v3/authConfigs/<provider>`).
CONFIG_TYPES = {OIDC: "oidcConfig", KEYCLOAK_OIDC: "keycloakOIDCConfig"}

_VISIBLE = re.compile(r"[!-~]+")
_SCOPE_TOKEN = re.compile(r"[!#-\[\]-~]+")  # RFC 6749 3.3: visible ASCII but " and \
_CLAIM = re.compile(r"[A-Za-z0-9_:./-]{1,256}")


def public_path(provider: str) -> str:
    """`/v3-public/oidcProviders/oidc`: where the provider's sign-in begins and ends."""
    return f"/v3-public/{PUBLIC_TYPES[provider]}s/{provider}"


def login_path(provider: str) -> str:
    return public_path(provider) + "/login"


def callback_path(provider: str) -> str:
    """Where the provider sends the browser back to: the one redirect URI to register."""
    return public_path(provider) + "/callback"


@dataclass(frozen=True)
class OidcConfig:
    provider: str = OIDC
    issuer: str = ""
    client_id: str = ""
    scope: str = DEFAULT_SCOPE
    groups_claim: str = DEFAULT_GROUPS_CLAIM
    enabled: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any] | None, provider: str) -> OidcConfig:
        spec = (obj or {}).get("spec") or {}
        return cls(
            provider=provider,
            issuer=spec.get("issuer", ""),
            client_id=spec.get("clientId", ""),
            scope=spec.get("scope") or DEFAULT_SCOPE,
            groups_claim=spec.get("groupsClaim") or DEFAULT_GROUPS_CLAIM,
            enabled=spec.get("enabled") is True,
        )

    def spec(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "clientId": self.client_id,
            "scope": self.scope,
            "groupsClaim": self.groups_claim,
            "enabled": self.enabled,
        }

    @property
    def complete(self) -> bool:
        return bool(self.issuer and self.client_id)

    @property
    def scopes(self) -> list[str]:
        return self.scope.split()


def check_issuer(value: Any) -> str:
    message = "issuer must be an https URL without query or fragment (http only on loopback)"
    if not isinstance(value, str) or not 0 < len(value) <= MAX_URL or not value.isascii():
        raise Invalid(message, "issuer")
    try:
        url = urlsplit(value)
        port = url.port  # ValueError for a port that is not a number or beyond 65535
    except ValueError:
        raise Invalid(message, "issuer") from None
    host = url.hostname
    plain = not url.query and not url.fragment and not url.username and not url.password
    if not host or not plain or not _VISIBLE.fullmatch(value) or port == 0:
        raise Invalid(message, "issuer")
    if url.scheme == "https" or (url.scheme == "http" and is_loopback(host)):
        return value
    raise Invalid(message, "issuer")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_client_id(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= 255 or not _VISIBLE.fullmatch(value):
        raise Invalid("clientId must be 1 to 255 visible ASCII characters", "clientId")
    return value


def check_client_secret(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_SECRET:
        raise Invalid(f"clientSecret must be 1 to {MAX_SECRET} characters", "clientSecret")
    if not _VISIBLE.fullmatch(value):
        raise Invalid("clientSecret must be visible ASCII characters", "clientSecret")
    return value


def check_scope(value: Any) -> str:
    """Space-separated scopes (Rancher's rule: no commas) that include `openid`."""
    message = "scope must be space-separated scopes including openid, at most 1024 characters"
    if not isinstance(value, str) or len(value) > MAX_URL or "," in value:
        raise Invalid(message, "scope")
    tokens = value.split()
    if "openid" not in tokens or not all(_SCOPE_TOKEN.fullmatch(t) for t in tokens):
        raise Invalid(message, "scope")
    return " ".join(tokens)


def check_groups_claim(value: Any) -> str:
    if not isinstance(value, str) or not _CLAIM.fullmatch(value):
        raise Invalid(
            "groupsClaim must be a claim name: letters, digits and _ : . / -", "groupsClaim"
        )
    return value


def check_issuer_host(url: str, allow_link_local: bool, field: str = "issuer") -> None:
    """Invalid (naming `field`) for a link-local or metadata host, unless allowed."""
    host = urlsplit(url).hostname or ""
    if not allow_link_local and addresses.is_metadata_host(host):
        raise Invalid(f"{field} host {host} is a link-local or cloud metadata address; the "
                      "setting allow-link-local-endpoints allows it", field)  # fmt: skip


def merged(
    current: OidcConfig, body: Mapping[str, Any], allow_link_local: bool = False
) -> OidcConfig:
    """`current` with the fields `body` gives, each checked (a PUT merges)."""
    checks = {
        "issuer": check_issuer,
        "clientId": check_client_id,
        "scope": check_scope,
        "groupsClaim": check_groups_claim,
    }
    spec = current.spec()
    for field, check in checks.items():
        if field in body and body[field] is not None:
            spec[field] = check(body[field])
    if body.get("issuer") is not None:
        check_issuer_host(spec["issuer"], allow_link_local)
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise Invalid("enabled must be true or false", "enabled")
        spec["enabled"] = body["enabled"]
    return OidcConfig.from_object({"spec": spec}, current.provider)
