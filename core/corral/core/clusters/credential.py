"""How corral reaches a downstream cluster: its API server, CA and a bearer token (or a client
certificate, for the management cluster itself in development)."""

from __future__ import annotations

import base64
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import httpx2
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse, hdrs
from lightkube import AsyncClient, KubeConfig
from yarl import URL

from corral.core import kubeconfig

REQUEST_TIMEOUT = 15.0
# What a path segment may hold unencoded besides letters, digits and "-._~" (RFC 3986 pchar).
# "/", "?", "#" and "%" are always encoded, so each segment given stays exactly one segment.
_SEGMENT_SAFE = "!$&'()*+,;=:@"
_DOT_SEGMENTS = {".", "..", b".", b".."}


class ForeignOrigin(aiohttp.ClientError):
    """A request of a cluster's session aimed at anything but that cluster's own server."""


@dataclass(frozen=True)
class Credential:
    server: str
    ca_cert: bytes | None = None  # PEM
    token: str | None = None
    client_cert: bytes | None = None  # PEM
    client_key: bytes | None = None  # PEM

    def kubeconfig(self, name: str = "downstream") -> dict[str, Any]:
        return kubeconfig.build(
            name,
            self.server,
            self.ca_cert,
            kubeconfig.Credentials(
                token=self.token, client_cert=self.client_cert, client_key=self.client_key
            ),
        )

    def client(self, timeout: float = REQUEST_TIMEOUT) -> AsyncClient:
        """A typed client (lightkube) for this cluster."""
        return AsyncClient(
            KubeConfig.from_dict(self.kubeconfig()),
            timeout=httpx2.Timeout(timeout),
            field_manager="corral",
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_cert.decode() if self.ca_cert else None)
        if self.client_cert and self.client_key:
            # ssl only loads a key pair from files.
            with tempfile.NamedTemporaryFile() as cert, tempfile.NamedTemporaryFile() as key:
                cert.write(self.client_cert)
                key.write(self.client_key)
                cert.flush()
                key.flush()
                context.load_cert_chain(cert.name, key.name)
        return context

    def headers(self) -> dict[str, str]:
        """The Authorization header for a request to the server, never a session default."""
        return {hdrs.AUTHORIZATION: f"Bearer {self.token}"} if self.token else {}

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

    def session(self, timeout: float | None = REQUEST_TIMEOUT) -> aiohttp.ClientSession:
        """A raw HTTP session (aiohttp) for this cluster: health, version, proxying. Relative
        URLs resolve against the server; a request for any other origin is refused before a
        connection is made, and the credential is attached to each request, never as a
        session default."""
        return aiohttp.ClientSession(
            base_url=self.server.rstrip("/") + "/",
            connector=aiohttp.TCPConnector(ssl=self.ssl_context()),
            middlewares=(self._authorize,),
            timeout=aiohttp.ClientTimeout(total=timeout, connect=min(timeout or 10, 10)),
        )

    async def _authorize(self, request: ClientRequest, send: ClientHandlerType) -> ClientResponse:
        # A middleware runs for every request of the session, redirects included.
        if not self.is_own(request.url):
            raise ForeignOrigin(f"refusing to send a request for {self.server} to another host")
        request.headers.update(self.headers())
        return await send(request)

    # -- storage in a Secret ----------------------------------------------------------------

    def secret_data(self) -> dict[str, str]:
        data = {"server": self.server.encode()}
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
        )


def from_environment() -> Credential:
    """The management cluster as this process reaches it ($KUBECONFIG or the service account)."""
    config = KubeConfig.from_env().get()
    if config is None:
        raise RuntimeError("no configuration for the management cluster")
    cluster, user = config.cluster, config.user
    token = (user.token or _text(_read(None, user.token_file))) if user else None
    return Credential(
        server=cluster.server,
        ca_cert=_read(cluster.certificate_auth_data, cluster.certificate_auth),
        token=token,
        client_cert=_read(user.client_cert_data, user.client_cert) if user else None,
        client_key=_read(user.client_key_data, user.client_key) if user else None,
    )


def _read(data: str | None, path: object) -> bytes | None:
    if data:
        return base64.b64decode(data)
    if path:
        return Path(str(path)).read_bytes()
    return None


def _text(data: bytes | None) -> str | None:
    return data.decode().strip() if data else None
