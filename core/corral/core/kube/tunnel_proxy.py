"""The proxy this process's own clients reach every agent's tunnel through
(docs/design/cluster-agent.md, sections 5-6): an HTTP CONNECT proxy on the loopback, with a key
of this process's alone. A tunnel held here is opened at once; one another process holds is
reached through that process's relay, over TLS that must verify as corral's own serving
certificate before the relay key is sent.

Why a proxy of the process's own rather than giving the clients the holder's relay as an
`https://` proxy: lightkube's transport (httpx) checks a proxy's certificate against the
proxy's address (a pod IP, in no certificate), and aiohttp takes one TLS context for both the
proxy and the origin, so it cannot trust corral's CA for the one and the cluster's for the
other. Here each hop has its own: the relay is checked by this module, the cluster's API
server by the client, end to end through both.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import logging
import secrets
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import h11
from yarl import URL

from corral.core.kube import connect
from corral.core.kube.tunnel_leases import Relays
from corral.core.tunnel.session import MAX_FRAME, Tunnel
from corral.core.tunnel.splice import splice

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class PeerTLS:
    """How a process checks another's relay: the peer's certificate must chain to corral's CA
    (the system's roots when corral has none of its own) and name `name`, the host of corral's
    external URL, which every replica's serving certificate carries."""

    context: ssl.SSLContext
    name: str

    @classmethod
    def of(cls, external_url: str, ca: bytes | None) -> PeerTLS:
        context = ssl.create_default_context(cadata=ca.decode() if ca else None)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        host = URL(external_url).host
        if not host:
            raise ValueError(f"no host in corral's external URL {external_url!r}")
        return cls(context, host)


class RelayRefused(ConnectionError):
    """The holder's relay did not verify, did not answer, or refused the stream."""


class TunnelProxy:
    """This process's CONNECT proxy to every tunnel: `proxy(cluster)` is the URL a cluster's
    clients are given (with this proxy's key: never logged)."""

    def __init__(
        self,
        relays: Relays,
        peer: PeerTLS | None,
        local: Callable[[str], Tunnel | None] = lambda _: None,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        """`local(cluster)`: the cluster's tunnel when this process holds it. `peer`: how
        another process's relay is checked; None reaches no tunnel held elsewhere."""
        self.relays = relays
        self._peer = peer
        self._local = local
        self._clock = clock
        self._key = secrets.token_urlsafe(32)
        self._server = connect.Server(self._serve)

    async def proxy(self, cluster: str) -> str | None:
        """The proxy URL that reaches the cluster's tunnel; None while no process holds one.
        It is the same whichever process holds the tunnel, so a connection built on it
        outlives the tunnel moving."""
        if self._local(cluster) is None and self._relay(cluster) is None:
            return None
        port = await self._server.start(LOOPBACK, 0)
        return f"http://{cluster}:{self._key}@{LOOPBACK}:{port}"

    async def close(self) -> None:
        await self._server.close()

    def _relay(self, cluster: str) -> str | None:
        """The address of the relay holding the cluster's tunnel, while its Lease is fresh."""
        held = self.relays.holding(cluster)
        if held is None or not held.relay or not held.fresh(self._clock()):
            return None
        return held.relay

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=connect.REQUEST_LIMIT)
        try:
            async with asyncio.timeout(connect.OPEN_TIMEOUT):
                request = await connect.read_request(http, reader)
                cluster = connect.authorised(request, self._key)
                if request.method != b"CONNECT" or cluster is None:
                    await connect.refuse(http, writer, 407)
                    return
                tunnel = self._local(cluster)
                stream = await tunnel.open() if tunnel is not None else None
                if stream is None:
                    relay = self._relay(cluster)
                    if relay is None or self._peer is None:
                        await connect.refuse(http, writer, 502)
                        return
                    early, peer_reader, peer_writer = await dial(
                        relay, cluster, await self.relays.key(), self._peer
                    )
        except RelayRefused as exc:
            log.info("cluster %s: its tunnel's relay refused: %s", cluster, exc)
            await connect.refuse(http, writer, 502)
            return
        except (ConnectionError, TimeoutError, h11.RemoteProtocolError) as exc:
            log.info("a connection to a cluster's tunnel failed: %s", type(exc).__name__)
            writer.close()
            return
        # Only the opening is bounded by OPEN_TIMEOUT: a stream (an exec, a port-forward, a
        # kept-alive connection) lasts as long as its ends keep it.
        if stream is not None:
            writer.write(connect.answer(http, 200))
            with contextlib.suppress(ConnectionError):
                await splice(stream, reader, writer)
            return
        writer.write(connect.answer(http, 200) + early)
        await join((reader, writer), (peer_reader, peer_writer))


async def dial(
    relay: str, cluster: str, key: str, peer: PeerTLS
) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection through the relay at `relay` (host:port) to the cluster's tunnel. The
    relay's certificate is verified before anything is sent: the key goes to corral alone.
    Returns the bytes that came after the relay's answer, and the connection."""
    host, _, port = relay.rpartition(":")
    try:
        reader, writer = await asyncio.open_connection(
            host.strip("[]"), int(port), ssl=peer.context, server_hostname=peer.name,
            ssl_handshake_timeout=connect.OPEN_TIMEOUT,
        )  # fmt: skip
    except ssl.SSLError as exc:
        raise RelayRefused(f"TLS with {relay}: {exc.reason or exc}") from None
    except OSError as exc:
        raise RelayRefused(f"{relay}: {exc.strerror or exc}") from None
    http = h11.Connection(h11.CLIENT, max_incomplete_event_size=connect.REQUEST_LIMIT)
    credentials = base64.b64encode(f"{cluster}:{key}".encode()).decode()
    request = h11.Request(
        method="CONNECT",
        target=f"{cluster}:443",
        headers=[("Host", f"{cluster}:443"), ("Proxy-Authorization", f"Basic {credentials}")],
    )
    writer.write(http.send(request) or b"")
    try:
        while True:
            event = http.next_event()
            if event is h11.NEED_DATA:
                http.receive_data(await reader.read(connect.REQUEST_LIMIT))
                continue
            if isinstance(event, h11.Response):
                break
            if isinstance(event, h11.InformationalResponse):
                continue
            raise h11.RemoteProtocolError(f"not a response: {type(event).__name__}")
    except (h11.RemoteProtocolError, ConnectionError) as exc:
        writer.close()
        raise RelayRefused(f"{relay}: {exc}") from None
    if event.status_code != 200:
        writer.close()
        raise RelayRefused(f"{relay} answered {event.status_code}")
    early, _ = http.trailing_data
    return early, reader, writer


Ends = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def join(one: Ends, other: Ends) -> None:
    """Copies both ways until either side ends, then closes both: TLS has no half close, so
    the end of one direction is the end of the connection."""
    copies = [asyncio.create_task(_copy(one[0], other[1])),
              asyncio.create_task(_copy(other[0], one[1]))]  # fmt: skip
    try:
        await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in copies:
            task.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
        for _, writer in (one, other):
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while data := await reader.read(MAX_FRAME):
            writer.write(data)
            await writer.drain()
