"""The API server's event loop: uvloop, except for the TLS of the connections corral opens.

uvloop's TLS takes the peer's TCP close (FIN) as an abort whenever it arrives before the
peer's TLS close_notify has been read, and drops every byte it holds but has not handed on
(up to its 256 KiB read buffer). That happens each time the reader is paused by flow
control: data, close_notify and FIN are then all in uvloop's buffer, but it reads the FIN
first. kube-apiserver closes an exec's WebSocket right after its last write, and the `/k8s`
relay pauses reading from the cluster while its client is slower: so the end of a large
exec's output, its status and the close frame were lost, and kubectl got close 1011
(docs/design/cluster-agent.md, section 11; uvloop's issue: MagicStack/uvloop pull 661).
asyncio's own TLS waits until the paused reader resumes and hands on all of it.

So the connections corral opens (to clusters, directly or through the tunnel's CONNECT)
use asyncio's TLS on uvloop's sockets; what corral serves keeps uvloop's TLS, whose peers
(kubectl, browsers) do not close while a response to them is paused.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

import uvloop

_T = TypeVar("_T")


class Loop(uvloop.Loop):
    async def create_connection(  # type: ignore[override]
        self,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        host: str | None = None,
        port: int | None = None,
        *,
        ssl: ssl.SSLContext | bool | None = None,
        server_hostname: str | None = None,
        ssl_handshake_timeout: float | None = None,
        ssl_shutdown_timeout: float | None = None,
        **kwargs: Any,
    ) -> tuple[asyncio.Transport, asyncio.BaseProtocol]:
        opened: Any = super().create_connection
        if not ssl:
            return await opened(protocol_factory, host, port, **kwargs)  # type: ignore[no-any-return]
        plain, _ = await opened(asyncio.Protocol, host, port, **kwargs)
        protocol = protocol_factory()
        try:
            secured = await self._wrap(
                plain, protocol, _context(ssl), server_hostname or host,
                ssl_handshake_timeout, ssl_shutdown_timeout, call_connection_made=True,
            )  # fmt: skip
        except BaseException:
            plain.close()
            raise
        return secured, protocol

    async def start_tls(
        self,
        transport: asyncio.BaseTransport,
        protocol: asyncio.BaseProtocol,
        sslcontext: ssl.SSLContext,
        *,
        server_side: bool = False,
        server_hostname: str | None = None,
        ssl_handshake_timeout: float | None = None,
        ssl_shutdown_timeout: float | None = None,
    ) -> asyncio.Transport:
        if server_side:
            started: Any = super().start_tls
            return await started(  # type: ignore[no-any-return]
                transport, protocol, sslcontext, server_side=True,
                ssl_handshake_timeout=ssl_handshake_timeout,
                ssl_shutdown_timeout=ssl_shutdown_timeout,
            )  # fmt: skip
        return await self._wrap(
            transport, protocol, sslcontext, server_hostname, ssl_handshake_timeout,
            ssl_shutdown_timeout, call_connection_made=False,
        )  # fmt: skip

    async def _wrap(
        self,
        transport: asyncio.BaseTransport,
        protocol: asyncio.BaseProtocol,
        context: ssl.SSLContext,
        server_hostname: str | None,
        handshake_timeout: Any,
        shutdown_timeout: Any,
        *,
        call_connection_made: bool,
    ) -> asyncio.Transport:
        """What asyncio's own `start_tls` does: its TLS protocol between the socket's transport
        and `protocol`, once the handshake is done."""
        stream = cast(asyncio.Transport, transport)  # uvloop's are no subclass of asyncio's
        waiter = self.create_future()
        secured = sslproto.SSLProtocol(
            self, protocol, context, waiter, server_side=False, server_hostname=server_hostname,
            ssl_handshake_timeout=handshake_timeout, ssl_shutdown_timeout=shutdown_timeout,
            call_connection_made=call_connection_made,
        )  # fmt: skip
        stream.pause_reading()
        stream.set_protocol(secured)
        made = self.call_soon(secured.connection_made, stream)
        resumed = self.call_soon(stream.resume_reading)
        try:
            await waiter
        except BaseException:
            stream.close()
            made.cancel()
            resumed.cancel()
            raise
        return secured._app_transport  # what asyncio's own start_tls returns


def _context(ssl_: ssl.SSLContext | bool) -> ssl.SSLContext:
    return ssl_ if isinstance(ssl_, ssl.SSLContext) else ssl.create_default_context()


def run(main: Coroutine[Any, Any, _T]) -> _T:
    return uvloop.run(main, loop_factory=Loop)
