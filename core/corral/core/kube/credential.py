"""Connecting with a cluster's credential: a typed client (lightkube) and a raw HTTP session
(aiohttp) that sends the credential to that cluster's server and nowhere else; and the
credential this process itself reaches the management cluster with."""

from __future__ import annotations

import base64
import ssl
import tempfile
from pathlib import Path

import aiohttp
import httpx2
from aiohttp import ClientHandlerType, ClientRequest, ClientResponse
from lightkube import AsyncClient, KubeConfig

from corral.core.clusters.credential import Credential
from corral.core.kube.client import FIELD_MANAGER

REQUEST_TIMEOUT = 15.0


class ForeignOrigin(aiohttp.ClientError):
    """A request of a cluster's session aimed at anything but that cluster's own server."""


def client_for(credential: Credential, timeout: float = REQUEST_TIMEOUT) -> AsyncClient:
    """A typed client (lightkube) for the cluster."""
    return AsyncClient(
        KubeConfig.from_dict(credential.kubeconfig()),
        timeout=httpx2.Timeout(timeout),
        field_manager=FIELD_MANAGER,
    )


def session_for(
    credential: Credential, timeout: float | None = REQUEST_TIMEOUT
) -> aiohttp.ClientSession:
    """A raw HTTP session (aiohttp) for the cluster: health, version, proxying. Relative URLs
    resolve against the server; a request for any other origin is refused before a connection
    is made, and the credential is attached to each request, never as a session default."""

    async def authorize(request: ClientRequest, send: ClientHandlerType) -> ClientResponse:
        # A middleware runs for every request of the session, redirects included.
        if not credential.is_own(request.url):
            raise ForeignOrigin(
                f"refusing to send a request for {credential.server} to another host"
            )
        request.headers.update(credential.headers())
        return await send(request)

    return aiohttp.ClientSession(
        base_url=credential.server.rstrip("/") + "/",
        connector=aiohttp.TCPConnector(ssl=_ssl_context(credential)),
        middlewares=(authorize,),
        timeout=aiohttp.ClientTimeout(total=timeout, connect=min(timeout or 10, 10)),
    )


def _ssl_context(credential: Credential) -> ssl.SSLContext:
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
