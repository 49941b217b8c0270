"""How corral reaches a downstream cluster: its API server, CA and a bearer token (or a client
certificate, for the management cluster itself in development). Connecting with it is
`corral.core.kube.credential`'s part."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from yarl import URL

from corral.core import kubeconfig

# What a path segment may hold unencoded besides letters, digits and "-._~" (RFC 3986 pchar).
# "/", "?", "#" and "%" are always encoded, so each segment given stays exactly one segment.
_SEGMENT_SAFE = "!$&'()*+,;=:@"
_DOT_SEGMENTS = {".", "..", b".", b".."}
TRANSPORT_TUNNEL = b"tunnel"


@dataclass(frozen=True)
class Credential:
    server: str
    ca_cert: bytes | None = None  # PEM
    token: str | None = None
    client_cert: bytes | None = None  # PEM
    client_key: bytes | None = None  # PEM
    # Reached through its agent's tunnel (docs/design/cluster-agent.md), not by dialling
    # `server`: the server still names it for TLS.
    tunnel: bool = False

    def kubeconfig(self, name: str = "downstream") -> dict[str, Any]:
        return kubeconfig.build(
            name,
            self.server,
            self.ca_cert,
            kubeconfig.Credentials(
                token=self.token, client_cert=self.client_cert, client_key=self.client_key
            ),
        )

    def headers(self) -> dict[str, str]:
        """The Authorization header for a request to the server, never a session default."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def url(self, *segments: str | bytes) -> URL:
        """The server's URL with these path segments appended, each encoded as one segment:
        whatever they hold, the result names the server, under its own path."""
        if any(segment in _DOT_SEGMENTS for segment in segments):
            raise ValueError("'.' and '..' are not forwarded as path segments")
        encoded = (quote(segment, safe=_SEGMENT_SAFE) for segment in segments)
        return URL(self.server).joinpath(*encoded, encoded=True)

    def is_own(self, url: URL) -> bool:
        """Whether `url` has the server's origin (scheme, host and port)."""
        own = URL(self.server)
        return (url.scheme, url.host, url.port) == (own.scheme, own.host, own.port)

    # -- storage in a Secret ----------------------------------------------------------------

    def secret_data(self) -> dict[str, str]:
        data = {"server": self.server.encode()}
        if self.tunnel:
            data["transport"] = TRANSPORT_TUNNEL
        for key, value in (
            ("ca.crt", self.ca_cert),
            ("token", (self.token or "").encode()),
            ("tls.crt", self.client_cert),
            ("tls.key", self.client_key),
        ):
            if value:
                data[key] = value
        return {k: base64.b64encode(v).decode() for k, v in data.items()}

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str]) -> Credential:
        raw = {k: base64.b64decode(v) for k, v in data.items()}
        return cls(
            server=raw["server"].decode(),
            ca_cert=raw.get("ca.crt"),
            token=raw["token"].decode() if raw.get("token") else None,
            client_cert=raw.get("tls.crt"),
            client_key=raw.get("tls.key"),
            tunnel=raw.get("transport") == TRANSPORT_TUNNEL,
        )
