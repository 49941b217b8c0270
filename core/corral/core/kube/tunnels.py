"""The agents' tunnels this process holds, one per cluster, and the relay other corral
processes reach them through (docs/design/cluster-agent.md, sections 5-6): a CONNECT proxy
served with corral's serving certificate only (TLS; a plaintext request never gets as far as
being read), where each CONNECT authorised with the cluster's name and corral's relay key
becomes a new stream of that cluster's tunnel. This process's own clients reach the tunnels
through `tunnel_proxy`, which opens a tunnel held here at once. What a CONNECT names is not
used: a stream reaches the agent's API server only.

A newer tunnel of a cluster replaces the one held: the older is closed (WebSocket code
`CLOSE_REPLACED`), here at once, on another replica when it finds its Lease taken. A tunnel
whose credential is no longer good (revoked, its cluster deleted) is closed at its next
renewal (`CLOSE_REVOKED`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import h11
from aiohttp import web
from lightkube import ApiError, AsyncClient

from corral.core.kube import connect, tunnel_leases
from corral.core.kube.tunnel_leases import Relays
from corral.core.tunnel.handshake import CLOSE_REPLACED, CLOSE_REVOKED
from corral.core.tunnel.session import MAX_MESSAGE, ProtocolViolation, Tunnel
from corral.core.tunnel.splice import splice

log = logging.getLogger(__name__)

# WebSocket close codes: going away, a peer that broke the protocol, a message too big.
CLOSE_GOING_AWAY = 1001
CLOSE_PROTOCOL = 1002
CLOSE_TOO_BIG = 1009

WebSocket = web.WebSocketResponse | aiohttp.ClientWebSocketResponse


class WebSocketCarrier:
    """A tunnel's carrier over aiohttp's WebSocket, either end: binary messages only, each at
    most `MAX_MESSAGE` bytes (the WebSocket itself is made with that `max_msg_size`)."""

    def __init__(self, socket: WebSocket) -> None:
        self._socket = socket

    async def send(self, data: bytes) -> None:
        try:
            await self._socket.send_bytes(data)
        except (ConnectionResetError, RuntimeError) as exc:  # RuntimeError: already closing
            raise ConnectionError(str(exc)) from None

    async def receive(self) -> bytes | None:
        message = await self._socket.receive()
        if message.type == aiohttp.WSMsgType.BINARY:
            data: bytes = message.data
            return data
        if message.type == aiohttp.WSMsgType.TEXT:
            raise ProtocolViolation("a text message in a tunnel", CLOSE_PROTOCOL)
        if message.type == aiohttp.WSMsgType.ERROR:
            error = message.data
            if isinstance(error, aiohttp.WebSocketError) and error.code == CLOSE_TOO_BIG:
                raise ProtocolViolation(f"a message over {MAX_MESSAGE} bytes", CLOSE_TOO_BIG)
            raise ProtocolViolation(f"a broken WebSocket frame: {error}", CLOSE_PROTOCOL)
        return None  # closing, closed


@dataclass
class Held:
    """A cluster's tunnel while this process holds it, with what the agent said of itself."""

    tunnel: Tunnel
    version: str
    image: str
    close: Callable[[int], Awaitable[None]]
    # Whether the credential the agent presented still opens the cluster's tunnel.
    still_authorised: Callable[[], bool]


class Tunnels:
    """The tunnels this process holds and its relay, which other corral processes reach them
    through: it listens on `listen` with TLS (`tls`, corral's serving certificate) and is
    advertised in each tunnel's Lease as `advertise` (the address other processes reach this
    one at)."""

    def __init__(
        self,
        kube: AsyncClient,
        relays: Relays,
        tls: ssl.SSLContext,
        listen: tuple[str, int] = ("127.0.0.1", 0),
        advertise: str = "",
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._kube = kube
        self.relays = relays
        self._tls = tls
        self._listen = listen
        self._advertise = advertise
        self._clock = clock
        self.identity = f"{socket.gethostname()}-{secrets.token_hex(4)}"
        self._held: dict[str, Held] = {}
        self._renewals: dict[str, asyncio.Task[None]] = {}
        self._server = connect.Server(self._relay)

    def held(self, cluster: str) -> Held | None:
        return self._held.get(cluster)

    def tunnel(self, cluster: str) -> Tunnel | None:
        held = self._held.get(cluster)
        return held.tunnel if held is not None else None

    async def hold(self, cluster: str, held: Held) -> None:
        """`held` becomes the cluster's tunnel, here and in its Lease; the one it replaces is
        closed, here at once, on another replica at its next renewal."""
        await self._serve()
        previous = self._held.get(cluster)
        self._held[cluster] = held
        await tunnel_leases.take(self._kube, cluster, self.identity, self._address(),
                                 held.version, held.image, self._clock())  # fmt: skip
        if cluster not in self._renewals:
            self._renewals[cluster] = asyncio.create_task(self._renew(cluster))
        if previous is not None:
            log.info("cluster %s: a new agent tunnel replaces the one held", cluster)
            await previous.close(CLOSE_REPLACED)

    async def release(self, cluster: str, held: Held) -> None:
        """The tunnel ended: forgotten with its Lease, unless a newer one replaced it."""
        if self._held.get(cluster) is not held:
            return
        del self._held[cluster]
        renewal = self._renewals.pop(cluster, None)
        if renewal is not None and renewal is not asyncio.current_task():
            renewal.cancel()
        try:
            await tunnel_leases.drop(self._kube, cluster, self.identity)
        except ApiError as exc:  # it expires on its own
            log.warning("cluster %s: its tunnel's Lease stays until it expires: %s", cluster, exc)

    async def close(self) -> None:
        for cluster, held in list(self._held.items()):
            await held.close(CLOSE_GOING_AWAY)
            await self.release(cluster, held)
        await self._server.close()
        for task in self._renewals.values():
            task.cancel()
        await asyncio.gather(*self._renewals.values(), return_exceptions=True)

    async def _serve(self) -> None:
        if self._server.port is None:
            await self.relays.key()
            await self._server.start(*self._listen, tls=self._tls)

    def _address(self) -> str:
        port = self._server.port
        assert port is not None
        host = self._advertise or self._listen[0]
        return host if ":" in host else f"{host}:{port}"

    async def _renew(self, cluster: str) -> None:
        """Keeps the cluster's Lease while its tunnel is held here; closes the tunnel once
        another replica took the Lease (the agent dialled it) or its credential is revoked."""
        while True:
            await asyncio.sleep(tunnel_leases.RENEW_SECONDS)
            held = self._held.get(cluster)
            if held is None:
                return
            if not held.still_authorised():
                log.info("cluster %s: its agent's credential was revoked", cluster)
                self._renewals.pop(cluster, None)
                await held.close(CLOSE_REVOKED)
                return
            try:
                ours = await tunnel_leases.renew(self._kube, cluster, self.identity, self._clock())
            except ApiError as exc:
                log.warning("cluster %s: its tunnel's Lease was not renewed: %s", cluster, exc)
                continue
            if not ours:
                log.info("cluster %s: its agent's tunnel is held by another replica", cluster)
                self._renewals.pop(cluster, None)
                await held.close(CLOSE_REPLACED)
                return

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=connect.REQUEST_LIMIT)
        try:
            async with asyncio.timeout(connect.OPEN_TIMEOUT):
                request = await connect.read_request(http, reader)
                cluster = connect.authorised(request, await self.relays.key())
                held = self._held.get(cluster or "")
                if request.method != b"CONNECT" or held is None:
                    await connect.refuse(http, writer, 407 if cluster is None else 502)
                    return
                stream = await held.tunnel.open()
        except (ConnectionError, TimeoutError, h11.RemoteProtocolError) as exc:
            log.info("a connection to a cluster's tunnel failed: %s", type(exc).__name__)
            writer.close()
            return
        writer.write(connect.answer(http, 200))
        with contextlib.suppress(ConnectionError):
            await splice(stream, reader, writer)
