"""The agent's one job: dial corral, serve the streams corral opens through the tunnel by
connecting each to this cluster's API server, and dial again when the tunnel ends, after a
backoff (docs/design/cluster-agent.md, section 4). Every stream goes to the one API server
this agent reaches; what a stream's CONNECT names is never used as a destination.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from corral.core.clusters.credential import Credential
from corral.core.kube.tunnels import WebSocketCarrier
from corral.core.tunnel import handshake
from corral.core.tunnel.session import MAX_MESSAGE, Stream, Tunnel, TunnelClosed
from corral.core.tunnel.splice import splice

log = logging.getLogger(__name__)

HEARTBEAT = 10.0
CONNECT_TIMEOUT = 10.0
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
# A tunnel that lived this long was a good one: the next failure starts the backoff afresh.
STEADY_SECONDS = 60.0
CA_LIMIT = 64 * 1024


class Refused(Exception):
    """corral refused the handshake (its status): the credential, or the parameters."""

    def __init__(self, status: int) -> None:
        super().__init__(f"corral refused the agent with HTTP {status}")
        self.status = status


@dataclass(frozen=True)
class Upstream:
    """This cluster's API server: where every stream goes, and what corral is told of it."""

    host: str
    port: int
    params: handshake.Params

    @classmethod
    def of(cls, credential: Credential) -> Upstream:
        if not credential.token or not credential.ca_cert:
            raise ValueError("the agent reaches its API server with a ServiceAccount token and CA")
        parts = urlsplit(credential.server)
        if parts.hostname is None:
            raise ValueError(f"no host in {credential.server!r}")
        params = handshake.Params(credential.server, credential.ca_cert, credential.token)
        return cls(parts.hostname, parts.port or 443, params)

    async def serve(self, stream: Stream) -> None:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except (OSError, TimeoutError) as exc:
            log.warning("cannot reach the API server at %s:%s: %s", self.host, self.port, exc)
            await stream.respond(502)
            return
        await stream.respond(200)
        await splice(stream, reader, writer)


@dataclass(frozen=True)
class Dial:
    """One dial to corral: its tunnel URL, what the agent presents, and how it trusts corral."""

    url: str  # http(s)://host[:port] of corral
    authorization: str
    version: str
    image: str
    ssl: ssl.SSLContext | bool  # False: no verification (insecureCommand only)

    def __repr__(self) -> str:
        return f"Dial(url={self.url!r})"  # never the credential

    async def tunnel(self, upstream: Upstream) -> None:
        """Holds one tunnel until it ends; `Refused` when corral will not take it."""
        headers = {
            "Authorization": self.authorization,
            handshake.HEADER_PARAMS: upstream.params.header(),
            handshake.HEADER_VERSION: self.version,
            handshake.HEADER_IMAGE: self.image,
        }
        timeout = aiohttp.ClientWSTimeout(ws_close=10.0)
        async with aiohttp.ClientSession() as session:
            try:
                socket = await session.ws_connect(
                    self.url + handshake.PATH, headers=headers, ssl=self.ssl,
                    max_msg_size=MAX_MESSAGE, heartbeat=HEARTBEAT, timeout=timeout,
                )  # fmt: skip
            except aiohttp.WSServerHandshakeError as exc:
                raise Refused(exc.status) from None
            async with socket:
                log.info("connected to corral at %s", self.url)
                tunnel = Tunnel(WebSocketCarrier(socket), client=False, accept=upstream.serve)
                try:
                    await tunnel.run()
                finally:
                    await tunnel.close()
                close = socket.close_code
        log.info("the tunnel to corral ended (close code %s)", close)


async def corral_ssl(url: str, checksum: str, insecure: bool) -> ssl.SSLContext | bool:
    """How the agent trusts corral: the system's CAs; corral's own CA from `/cacerts` when its
    checksum is pinned (as the node command pins it); nothing when insecure."""
    if insecure:
        return False
    if not checksum:
        return ssl.create_default_context()
    async with (
        aiohttp.ClientSession() as session,
        session.get(url + "/cacerts", ssl=False) as answer,
    ):
        ca = await answer.content.read(CA_LIMIT)
    if answer.status != 200 or hashlib.sha256(ca).hexdigest() != checksum:
        raise ssl.SSLError("corral's CA does not match CORRAL_CA_CHECKSUM")
    return ssl.create_default_context(cadata=ca.decode())


class Backoff:
    """1 s doubling to 30 s, with jitter, afresh after a tunnel that lived a minute."""

    def __init__(self) -> None:
        self._next = FIRST_BACKOFF

    def after(self, lived: float) -> float:
        if lived >= STEADY_SECONDS:
            self._next = FIRST_BACKOFF
        delay = self._next * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret
        self._next = min(self._next * 2, MAX_BACKOFF)
        return delay


async def run(dial: Dial, upstream: Upstream) -> None:
    """Keeps a tunnel up until cancelled."""
    backoff = Backoff()
    while True:
        started = time.monotonic()
        try:
            await dial.tunnel(upstream)
        except Refused as exc:
            log.warning("%s", exc)
        except (aiohttp.ClientError, ConnectionError, TunnelClosed, TimeoutError) as exc:
            log.warning("the tunnel to corral failed: %s", exc)
        delay = backoff.after(time.monotonic() - started)
        log.info("dialling corral again in %.1f s", delay)
        await asyncio.sleep(delay)
