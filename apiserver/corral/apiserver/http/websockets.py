"""WebSocket handshakes corral accepts, and relaying one WebSocket to another, message by
message, until either side closes.

A handshake authenticated by the session cookie must come from a page of corral's own origin:
a browser sends the cookie with a WebSocket opened by any site's page, and a handshake carries
no CSRF header, so the Origin is what tells corral's console from another site.

Pings are answered by corral on each side (aiohttp's autoping), never relayed: kube-apiserver
drops an exec's connection, and the output still queued for it, when a ping reaches it while
that output waits for a slow reader (a heartbeat every 5 s from kubectl, through a relay that
is slower than kubectl, was one). A client's heartbeat measures its hop to corral: a cluster
that stops answering is seen when its connection breaks (close 1011 then), not by the
heartbeat. The first side to close closes the other with its code.

A relay runs in a task of its own: a handler may be cancelled (at shutdown, or when aiohttp
cancels handlers whose client went away), and the other side must still get its close frame
rather than a connection left open.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import ClientWebSocketResponse, WSCloseCode, WSMsgType, web
from yarl import URL

from corral.apiserver.http.errors import ApiError
from corral.core import errors

log = logging.getLogger(__name__)

Socket = web.WebSocketResponse | ClientWebSocketResponse


def check_handshake(request: web.Request, via_cookie: bool, own_origin: str) -> None:
    """400 for a request that is no WebSocket handshake; 403 for one authenticated by the
    session cookie from another origin than `own_origin` (corral's external URL), or none."""
    if not web.WebSocketResponse(protocols=offered_protocols(request)).can_prepare(request).ok:
        raise ApiError(400, "BadRequest", "not a valid WebSocket handshake")
    if not via_cookie:
        return  # a token is no ambient credential: any origin, or none (kubectl), may send it
    origin = request.headers.get("Origin")
    if origin is None:
        # A browser always sends one; a cookie without it is no page of corral's.
        raise errors.forbidden("a WebSocket opened with the session cookie must carry corral's "
                               "Origin")  # fmt: skip
    if not same_origin(origin, own_origin):
        raise errors.forbidden(f"WebSocket from a foreign origin: {origin}")


def same_origin(origin: str, own: str) -> bool:
    theirs, ours = URL(origin), URL(own)
    return theirs.host is not None and (theirs.scheme, theirs.host, theirs.port) == (
        ours.scheme,
        ours.host,
        ours.port,
    )


def offered_protocols(request: web.Request) -> list[str]:
    return [
        protocol.strip()
        for value in request.headers.getall("Sec-WebSocket-Protocol", [])
        for protocol in value.split(",")
        if protocol.strip()
    ]


# Relays under way: the event loop keeps only weak references to tasks.
_RUNNING: set[asyncio.Task[None]] = set()


async def relay(client: Socket, upstream: Socket) -> None:
    """Until both directions have ended and both sides are closed."""
    task = asyncio.create_task(_relay(client, upstream))
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    await asyncio.shield(task)


async def _relay(client: Socket, upstream: Socket) -> None:
    ended = await asyncio.gather(
        _pipe(client, upstream), _pipe(upstream, client), return_exceptions=True
    )
    for outcome in ended:
        if isinstance(outcome, Exception):
            log.warning("websocket relay failed: %r", outcome)


async def _pipe(source: Socket, sink: Socket) -> None:
    code: int | None = None
    try:
        while True:
            message = await source.receive()
            if message.type == WSMsgType.BINARY:
                await sink.send_bytes(message.data)
            elif message.type == WSMsgType.TEXT:
                await sink.send_str(message.data)
            elif message.type == WSMsgType.CLOSE:
                # The peer's own code: aiohttp's `close_code` turns into 1006 when the peer
                # drops the connection before our reply to its close, as Go servers do.
                code = message.data
                break
            else:  # closing, closed (by the other direction), or an error
                if message.type == WSMsgType.ERROR:
                    log.debug("websocket relay: %s", source.exception())
                code = source.close_code
                break
    except ConnectionError as exc:
        # The sink went away while a message was on its way to it.
        log.debug("websocket relay: %s", exc)
    finally:
        await sink.close(code=close_code(code))


def close_code(code: int | None) -> int:
    """The code to close the other side with: the peer's own when it may be sent on (RFC 6455
    7.4), normal closure when it gave none, and internal error when its connection broke."""
    if code is None or code == WSCloseCode.OK or code == 1005:  # 1005: closed without a code
        return WSCloseCode.OK
    if 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999:
        return code
    return WSCloseCode.INTERNAL_ERROR
