"""The GitHub provider's configuration (Rancher's `githubConfig`), as an administrator gives it
and as the `github` AuthConfig stores it (the client secret apart, in a Secret), each field
checked, and who its access mode lets sign in.

`hostname` is `github.com` or a GitHub Enterprise Server host (`host[:port]`): the OAuth
endpoints are on it, the REST API on `api.github.com` or `<host>/api/v3`. The access token a
sign-in gets is sent to that API and nowhere else. `tls: false` (plain http) is accepted only
for a loopback host, as for the OpenID Connect issuer. `certificate` is the CA bundle (PEM) to
trust for that host instead of the system's, for an Enterprise server with a private CA.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509

from corral.core.auth import principals
from corral.core.auth.oidc_config import check_client_id, check_issuer_host, is_loopback
from corral.core.errors import Invalid

PUBLIC_TYPE = "githubProvider"
CONFIG_TYPE = "githubConfig"
PUBLIC_PATH = "/v3-public/githubProviders/github"
LOGIN_PATH = PUBLIC_PATH + "/login"
CALLBACK_PATH = PUBLIC_PATH + "/callback"
GITHUB_COM = "github.com"
# Reading the user's organisations and teams needs `read:org`; `/user` needs no scope.
SCOPE = "read:user read:org"

UNRESTRICTED, RESTRICTED, REQUIRED = "unrestricted", "restricted", "required"
ACCESS_MODES = (UNRESTRICTED, RESTRICTED, REQUIRED)
MAX_ALLOWED = 256
MAX_CERTIFICATE = 64 * 1024
_ALLOWED_PREFIXES = (principals.user_principal(principals.GITHUB, ""),
                     principals.GITHUB_ORG, principals.GITHUB_TEAM)  # fmt: skip


@dataclass(frozen=True)
class GithubConfig:
    hostname: str = GITHUB_COM
    tls: bool = True
    client_id: str = ""
    enabled: bool = False
    access_mode: str = UNRESTRICTED
    allowed_principal_ids: tuple[str, ...] = ()
    certificate: str = field(default="", repr=False)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any] | None) -> GithubConfig:
        spec = (obj or {}).get("spec") or {}
        return cls(
            hostname=spec.get("hostname") or GITHUB_COM,
            tls=spec.get("tls") is not False,
            client_id=spec.get("clientId", ""),
            enabled=spec.get("enabled") is True,
            access_mode=spec.get("accessMode") or UNRESTRICTED,
            allowed_principal_ids=tuple(spec.get("allowedPrincipalIds") or ()),
            certificate=spec.get("certificate", ""),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname,
            "tls": self.tls,
            "clientId": self.client_id,
            "enabled": self.enabled,
            "accessMode": self.access_mode,
            "allowedPrincipalIds": list(self.allowed_principal_ids),
            "certificate": self.certificate,
        }

    @property
    def web_url(self) -> str:
        """Where the OAuth endpoints are: `https://github.com/login/oauth/...`."""
        return f"{'https' if self.tls else 'http'}://{self.hostname}"

    @property
    def api_url(self) -> str:
        if self.hostname.lower() == GITHUB_COM:
            return "https://api.github.com"
        return f"{self.web_url}/api/v3"


def check_hostname(value: Any) -> str:
    message = "hostname must be github.com or a GitHub Enterprise host[:port], no scheme or path"
    if not isinstance(value, str) or not 0 < len(value) <= 253 or not value.isascii():
        raise Invalid(message, "hostname")
    try:
        url = urlsplit("//" + value)
        port = url.port  # ValueError for a port that is not a number or beyond 65535
    except ValueError:
        raise Invalid(message, "hostname") from None
    if not url.hostname or url.netloc != value or url.username or port == 0:
        raise Invalid(message, "hostname")
    if any(c.isspace() or c in "/?#@\\" for c in value):
        raise Invalid(message, "hostname")
    return value


def check_access_mode(value: Any) -> str:
    if value not in ACCESS_MODES:
        raise Invalid(f"accessMode must be one of {', '.join(ACCESS_MODES)}", "accessMode")
    return str(value)


def check_allowed(value: Any) -> tuple[str, ...]:
    message = (f"allowedPrincipalIds must be at most {MAX_ALLOWED} principals "
               "github_user://<id>, github_org://<id> or github_team://<id>")  # fmt: skip
    if not isinstance(value, list) or len(value) > MAX_ALLOWED:
        raise Invalid(message, "allowedPrincipalIds")
    for principal in value:
        if not isinstance(principal, str) or not principal.startswith(_ALLOWED_PREFIXES):
            raise Invalid(message, "allowedPrincipalIds")
        if not principal.split("://", 1)[1].isdigit() or len(principal) > 64:
            raise Invalid(message, "allowedPrincipalIds")
    return tuple(dict.fromkeys(value))


def check_certificate(value: Any) -> str:
    """Empty (the system's CAs), or PEM certificates that parse."""
    message = f"certificate must be PEM CA certificates, at most {MAX_CERTIFICATE} characters"
    if not isinstance(value, str) or len(value) > MAX_CERTIFICATE or not value.isascii():
        raise Invalid(message, "certificate")
    if not value.strip():
        return ""
    try:
        x509.load_pem_x509_certificates(value.encode())
    except ValueError:
        raise Invalid(message, "certificate") from None
    return value


def merged(
    current: GithubConfig, body: Mapping[str, Any], allow_link_local: bool = False
) -> GithubConfig:
    """`current` with the fields `body` gives, each checked (a PUT merges)."""
    spec = current.spec()
    checks = {
        "hostname": check_hostname,
        "clientId": check_client_id,
        "accessMode": check_access_mode,
        "allowedPrincipalIds": lambda v: list(check_allowed(v)),
        "certificate": check_certificate,
    }
    for name, check in checks.items():
        if name in body and body[name] is not None:
            spec[name] = check(body[name])
    for flag in ("tls", "enabled"):
        if flag in body and body[flag] is not None:
            if not isinstance(body[flag], bool):
                raise Invalid(f"{flag} must be true or false", flag)
            spec[flag] = body[flag]
    host = urlsplit("//" + spec["hostname"]).hostname or ""
    if not spec["tls"] and not is_loopback(host):
        raise Invalid("tls may be false only for a loopback hostname", "tls")
    if body.get("hostname") is not None:
        check_issuer_host(f"https://{spec['hostname']}", allow_link_local, "hostname")
    config = GithubConfig.from_object({"spec": spec})
    if config.enabled and not config.client_id:
        raise Invalid("an enabled provider needs a client id", "clientId")
    return config


def admits(config: GithubConfig, principal_ids: Iterable[str], member: bool) -> bool:
    """Whether the access mode lets a user sign in: anyone (`unrestricted`); a user who is, or
    is in a group that is, in `allowedPrincipalIds` (`required`); those, and members of a
    cluster or project (`restricted`, as Rancher's)."""
    if config.access_mode == UNRESTRICTED:
        return True
    if not set(principal_ids).isdisjoint(config.allowed_principal_ids):
        return True
    return config.access_mode == RESTRICTED and member
