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

import aiohttp
import httpx2
from lightkube import AsyncClient, KubeConfig

from corral.core import kubeconfig

REQUEST_TIMEOUT = 15.0


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
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def session(self, timeout: float | None = REQUEST_TIMEOUT) -> aiohttp.ClientSession:
        """A raw HTTP session (aiohttp) for this cluster: health, version, proxying."""
        return aiohttp.ClientSession(
            base_url=self.server.rstrip("/") + "/",
            connector=aiohttp.TCPConnector(ssl=self.ssl_context()),
            headers=self.headers(),
            timeout=aiohttp.ClientTimeout(total=timeout, connect=min(timeout or 10, 10)),
        )

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
