"""The HTTP CONNECT requests corral's tunnel proxies take (`tunnel_proxy`, this process's own;
`tunnels`, the relay other processes reach): one request line and a few headers, parsed by
h11, authorised with `Proxy-Authorization: Basic <cluster>:<key>`; and the server both listen
with."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import ssl
from collections.abc import Awaitable, Callable

import h11

# How long a CONNECT may take to arrive, and the stream it asks for to open.
OPEN_TIMEOUT = 10.0
# A CONNECT request is one line and a few headers.
REQUEST_LIMIT = 8 * 1024


async def read_request(http: h11.Connection, reader: asyncio.StreamReader) -> h11.Request:
    while True:
        event = http.next_event()
        if isinstance(event, h11.Request):
            return event
        if event is h11.NEED_DATA:
            data = await reader.read(REQUEST_LIMIT)
            http.receive_data(data)  # b"" is the end: h11 then raises for a cut request
            continue
        raise h11.RemoteProtocolError(f"not a request: {type(event).__name__}")


def authorised(request: h11.Request, key: str) -> str | None:
    """The cluster a request's Proxy-Authorization names with `key`; None without it."""
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
        if hmac.compare_digest(secret, key.encode()):
            return cluster.decode("ascii", "replace")
    return None


def answer(http: h11.Connection, status: int) -> bytes:
    return http.send(h11.Response(status_code=status, headers=[])) or b""


async def refuse(http: h11.Connection, writer: asyncio.StreamWriter, status: int) -> None:
    writer.write(answer(http, status))
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A stream server whose connections end with it: `close()` cancels those still open, and
    they end as finished ones (the stream server's callback would log a cancelled one as an
    error at every stop)."""

    def __init__(self, serve: Serve) -> None:
        self._serve = serve
        self._server: asyncio.Server | None = None
        # Callers that ask at once wait for one start: each would otherwise listen on a port
        # of its own, and the tunnel proxy's URL (which names the port) would differ between
        # them, so the connections built on it would replace and close one another.
        self._starting = asyncio.Lock()
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int | None:
        """The port it listens on; None until started."""
        return None if self._server is None else int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Listens from now on, once however often (and however many at once) it is called;
        the port."""
        async with self._starting:
            if self._server is None:
                self._server = await asyncio.start_server(
                    self._accepted, host, port, ssl=tls,
                    ssl_handshake_timeout=OPEN_TIMEOUT if tls is not None else None,
                )  # fmt: skip
            return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            writer.close()
        finally:
            self._connections.discard(task)
