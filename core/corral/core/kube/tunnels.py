"""The agents' tunnels this process holds, one per cluster, and the way corral's clients
reach them: an HTTP CONNECT proxy on loopback (docs/design/cluster-agent.md, section 5). A
tunnelled cluster's clients (lightkube's and aiohttp's, as for any cluster) are given the
proxy; each CONNECT, authorised with the cluster's name and this process's random proxy
secret, becomes a new stream of that cluster's tunnel, and the client speaks TLS to the
cluster's API server through it as it would directly. Nothing above the registry knows the
difference. What the CONNECT names is not used: a stream reaches the agent's API server only.

A newer tunnel of a cluster replaces the one held: the older is closed (WebSocket code
`CLOSE_REPLACED`), never both used.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import h11
from aiohttp import web

from corral.core.tunnel.handshake import CLOSE_REPLACED
from corral.core.tunnel.session import MAX_MESSAGE, ProtocolViolation, Tunnel
from corral.core.tunnel.splice import splice

log = logging.getLogger(__name__)

# How long a CONNECT may take to arrive, and the agent to open its stream.
OPEN_TIMEOUT = 10.0
# A CONNECT request is one line and a few headers.
REQUEST_LIMIT = 8 * 1024
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


class Tunnels:
    def __init__(self) -> None:
        self._held: dict[str, Held] = {}
        self._secret = secrets.token_urlsafe(32)
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def held(self, cluster: str) -> Held | None:
        return self._held.get(cluster)

    def proxy(self, cluster: str) -> str | None:
        """The proxy URL (with its credentials) that reaches the cluster's tunnel while it is
        held here; None otherwise. The URL holds a secret: never logged."""
        if cluster not in self._held or self._server is None:
            return None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://{cluster}:{self._secret}@127.0.0.1:{port}"

    async def hold(self, cluster: str, held: Held) -> None:
        """`held` becomes the cluster's tunnel; the one it replaces is closed."""
        if self._server is None:
            self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        previous = self._held.get(cluster)
        self._held[cluster] = held
        if previous is not None:
            log.info("cluster %s: a new agent tunnel replaces the one held", cluster)
            await previous.close(CLOSE_REPLACED)

    def release(self, cluster: str, held: Held) -> None:
        """The tunnel ended: forgotten, unless a newer one replaced it."""
        if self._held.get(cluster) is held:
            del self._held[cluster]

    async def close(self) -> None:
        for cluster, held in list(self._held.items()):
            await held.close(CLOSE_GOING_AWAY)
            self.release(cluster, held)
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            if task is not None:
                self._connections.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=REQUEST_LIMIT)
        try:
            async with asyncio.timeout(OPEN_TIMEOUT):
                request = await _request(http, reader)
                cluster = self._authorised(request)
                held = self._held.get(cluster or "")
                if request.method != b"CONNECT" or held is None:
                    writer.write(_answer(http, 407 if cluster is None else 502))
                    writer.close()
                    return
                stream = await held.tunnel.open()
        except (ConnectionError, TimeoutError, h11.RemoteProtocolError) as exc:
            log.info("a connection to a cluster's tunnel failed: %s", type(exc).__name__)
            writer.close()
            return
        writer.write(_answer(http, 200))
        with contextlib.suppress(ConnectionError):
            await splice(stream, reader, writer)

    def _authorised(self, request: h11.Request) -> str | None:
        """The cluster a request's Proxy-Authorization names with this process's secret."""
        for name, value in request.headers:
            if name != b"proxy-authorization":
                continue
            scheme, _, encoded = value.partition(b" ")
            if scheme.lower() != b"basic":
                return None
            try:
                cluster, _, secret = base64.b64decode(encoded, validate=True).partition(b":")
            except binascii.Error:
                return None
            if hmac.compare_digest(secret, self._secret.encode()):
                return cluster.decode("ascii", "replace")
        return None


async def _request(http: h11.Connection, reader: asyncio.StreamReader) -> h11.Request:
    while True:
        event = http.next_event()
        if isinstance(event, h11.Request):
            return event
        if event is h11.NEED_DATA:
            data = await reader.read(REQUEST_LIMIT)
            http.receive_data(data)  # b"" is the end: h11 then raises for a cut request
            continue
        raise h11.RemoteProtocolError(f"not a request: {type(event).__name__}")


def _answer(http: h11.Connection, status: int) -> bytes:
    data = http.send(h11.Response(status_code=status, headers=[]))
    return data or b""
