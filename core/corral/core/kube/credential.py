"""Connecting with a cluster's credential: a typed client (lightkube) and a raw HTTP session
(aiohttp) that sends the credential to that cluster's server and nowhere else; and the
credential this process itself reaches the management cluster with."""

from __future__ import annotations

import base64
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import httpx2
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse
from lightkube import AsyncClient, KubeConfig

from corral.core.clusters.credential import Credential
from corral.core.kube.client import FIELD_MANAGER

REQUEST_TIMEOUT = 15.0
# How much of a refused upgrade's answer is kept: kube-apiserver's Status is a few hundred bytes.
REFUSAL_LIMIT = 64 * 1024


class ForeignOrigin(aiohttp.ClientError):
    """A request of a cluster's session aimed at anything but that cluster's own server."""


class UpgradeRefused(aiohttp.ClientError):
    """The server answered an upgrade (a WebSocket handshake) with anything but 101: its
    status, headers and body (at most `REFUSAL_LIMIT` bytes). aiohttp's own handshake error
    drops the body (aio-libs/aiohttp#2279), and the body is where kube-apiserver says why."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        super().__init__(f"upgrade refused with HTTP {status}")
        self.status = status
        self.headers = headers
        self.body = body


def client_for(
    credential: Credential,
    timeout: float = REQUEST_TIMEOUT,
    transport: httpx2.AsyncBaseTransport | None = None,
    proxy: str | None = None,
) -> AsyncClient:
    """A typed client (lightkube) for the cluster; over `transport` when given (which then
    holds the TLS settings, `ssl_context`), through the CONNECT proxy `proxy` when given (a
    tunnel's, `core.kube.tunnels`)."""
    if transport is None and proxy is not None:
        transport = httpx2.AsyncHTTPTransport(verify=ssl_context(credential), proxy=proxy)
    return AsyncClient(
        KubeConfig.from_dict(credential.kubeconfig()),
        timeout=httpx2.Timeout(timeout),
        field_manager=FIELD_MANAGER,
        transport=transport,
    )


def session_for(
    credential: Credential, timeout: float | None = REQUEST_TIMEOUT, proxy: str | None = None
) -> aiohttp.ClientSession:
    """A raw HTTP session (aiohttp) for the cluster: health, version, proxying, WebSockets.
    Relative URLs resolve against the server; a request for any other origin is refused before
    a connection is made, and the credential is attached to each request, never as a session
    default. An upgrade the server refuses raises `UpgradeRefused`. Connections go through the
    CONNECT proxy `proxy` when given (a tunnel's), TLS still end to end to the server."""

    async def authorize(request: ClientRequest, send: ClientHandlerType) -> ClientResponse:
        # A middleware runs for every request of the session, redirects included.
        if not credential.is_own(request.url):
            raise ForeignOrigin(
                f"refusing to send a request for {credential.server} to another host"
            )
        request.headers.update(credential.headers())
        response = await send(request)
        if request.headers.get("Upgrade") and response.status != 101:
            # A redirect too: an upgrade is never followed elsewhere.
            raise await _refusal(response)
        return response

    return aiohttp.ClientSession(
        base_url=credential.server.rstrip("/") + "/",
        connector=aiohttp.TCPConnector(ssl=ssl_context(credential)),
        proxy=proxy,
        middlewares=(authorize,),
        timeout=aiohttp.ClientTimeout(total=timeout, connect=min(timeout or 10, 10)),
    )


async def _refusal(response: ClientResponse) -> UpgradeRefused:
    try:
        body = await read_at_most(response, REFUSAL_LIMIT)
    finally:
        response.close()
    return UpgradeRefused(response.status, response.headers, body)


async def read_at_most(response: ClientResponse, limit: int) -> bytes:
    """The response's body up to `limit` bytes (an error's: never a stream's)."""
    body = bytearray()
    while len(body) < limit:
        chunk = await response.content.read(limit - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


def ssl_context(credential: Credential) -> ssl.SSLContext:
    """Trusts the cluster's CA and presents the credential's client certificate, if any."""
    ca = credential.ca_cert
    context = ssl.create_default_context(cadata=ca.decode() if ca else None)
    if credential.client_cert and credential.client_key:
        # ssl only loads a key pair from files.
        with tempfile.NamedTemporaryFile() as cert, tempfile.NamedTemporaryFile() as key:
            cert.write(credential.client_cert)
            key.write(credential.client_key)
            cert.flush()
            key.flush()
            context.load_cert_chain(cert.name, key.name)
    return context


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
