"""The WebSocket relay of the kubeconfig proxy: data both ways, pings answered by the relay and
never passed on, the first close passed on with its code, and which origins a
cookie-authenticated upgrade may come from. Checked between a client, a relaying server and
an upstream server, all of aiohttp."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestServer

from corral.apiserver.http.websockets import close_code, relay, same_origin

Upstream = Callable[[web.WebSocketResponse], Awaitable[None]]


@dataclass
class Seen:
    """What the upstream server received, in order, and the code it was closed with."""

    messages: list[tuple[WSMsgType, object]] = field(default_factory=list)
    close_code: int | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)


async def echo(socket: web.WebSocketResponse, seen: Seen) -> None:
    async for message in socket:
        seen.messages.append((message.type, message.data))
        if message.type == WSMsgType.TEXT and message.data.startswith("close "):
            await socket.close(code=int(message.data.split()[1]))
        elif message.type == WSMsgType.TEXT:
            await socket.send_str(message.data.upper())
        elif message.type == WSMsgType.BINARY:
            await socket.send_bytes(message.data[::-1])
        elif message.type == WSMsgType.PING:
            await socket.pong(message.data)
    seen.close_code = socket.close_code
    seen.closed.set()


@pytest.fixture
async def relayed() -> AsyncIterator[tuple[str, Seen]]:
    """A relaying server in front of an echoing upstream; the relay's URL."""
    seen = Seen()

    async def upstream_handler(request: web.Request) -> web.StreamResponse:
        socket = web.WebSocketResponse(protocols=("v5.channel.k8s.io",), autoping=False)
        await socket.prepare(request)
        await echo(socket, seen)
        return socket

    upstream_app = web.Application()
    upstream_app.router.add_get("/", upstream_handler)
    upstream = TestServer(upstream_app, host="127.0.0.1")
    await upstream.start_server()
    session = aiohttp.ClientSession()

    async def relay_handler(request: web.Request) -> web.StreamResponse:
        # As routes/proxy.py opens them: each side's pings answered by the relay.
        outbound = await session.ws_connect(
            upstream.make_url("/"), protocols=("v5.channel.k8s.io",)
        )
        client = web.WebSocketResponse(protocols=(outbound.protocol or "",))
        await client.prepare(request)
        await relay(client, outbound)
        return client

    relay_app = web.Application()
    relay_app.router.add_get("/", relay_handler)
    front = TestServer(relay_app, host="127.0.0.1")
    await front.start_server()
    yield str(front.make_url("/")), seen
    await front.close()
    await session.close()
    await upstream.close()


async def test_messages_of_every_kind_go_both_ways(relayed: tuple[str, Seen]) -> None:
    url, seen = relayed
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url, protocols=("v5.channel.k8s.io",), autoping=False) as socket,
    ):
        assert socket.protocol == "v5.channel.k8s.io"
        await socket.send_str("hello")
        assert (await socket.receive()).data == "HELLO"
        await socket.send_bytes(b"\x01abc")
        assert (await socket.receive()).data == b"cba\x01"
        await socket.ping(b"are you there")
        pong = await socket.receive()  # from the relay: the upstream never sees the ping
        assert (pong.type, pong.data) == (WSMsgType.PONG, b"are you there")
        await socket.send_bytes(b"x" * (1 << 20))
        assert (await socket.receive()).data == b"x" * (1 << 20)
    assert seen.messages[:2] == [(WSMsgType.TEXT, "hello"), (WSMsgType.BINARY, b"\x01abc")]
    assert all(kind != WSMsgType.PING for kind, _ in seen.messages)
    await asyncio.wait_for(seen.closed.wait(), 5)
    assert seen.close_code == 1000  # the client's own close, passed on


async def test_the_upstreams_close_code_reaches_the_client(relayed: tuple[str, Seen]) -> None:
    url, _ = relayed
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url, autoclose=False) as socket,
    ):
        await socket.send_str("close 4001")
        closing = await socket.receive()
        assert (closing.type, closing.data) == (WSMsgType.CLOSE, 4001)


async def test_a_client_close_code_reaches_the_upstream(relayed: tuple[str, Seen]) -> None:
    url, seen = relayed
    async with aiohttp.ClientSession() as session:
        socket = await session.ws_connect(url)
        await socket.send_str("x")
        await socket.receive()
        await socket.close(code=4002)
    await asyncio.wait_for(seen.closed.wait(), 5)
    assert seen.close_code == 4002


@pytest.mark.parametrize(
    ("code", "sent"),
    [
        (None, 1000), (1000, 1000), (1005, 1000), (1001, 1001), (1011, 1011), (4001, 4001),
        (1006, 1011), (1015, 1011), (999, 1011), (5000, 1011), (2000, 1011),
    ],
)  # fmt: skip
def test_close_codes_that_may_not_be_sent_become_normal_or_internal_error(
    code: int | None, sent: int
) -> None:
    assert close_code(code) == sent


@pytest.mark.parametrize(
    ("origin", "same"),
    [
        ("https://corral.example", True),
        ("https://corral.example:443", True),
        ("https://corral.example:8443", False),
        ("http://corral.example", False),
        ("https://evil.example", False),
        ("https://corral.example.evil.example", False),
        ("null", False),
        ("", False),
    ],
)
def test_only_corrals_own_origin_is_the_same(origin: str, same: bool) -> None:
    assert same_origin(origin, "https://corral.example") is same
