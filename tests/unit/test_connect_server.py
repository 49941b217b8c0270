"""The server both CONNECT proxies listen with: started once however many callers ask at once,
and its connections end with it, quietly."""

from __future__ import annotations

import asyncio
from typing import Any

from corral.core.kube import connect


async def test_closing_ends_open_connections_without_an_error_logged() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    serving = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        serving.set()
        await reader.read()  # a client that never ends its connection

    server = connect.Server(serve)
    assert server.port is None
    port = await server.start("127.0.0.1", 0)
    assert await server.start("127.0.0.1", 0) == port == server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await asyncio.wait_for(serving.wait(), 5)
        await server.close()
        assert server.port is None
        assert await asyncio.wait_for(reader.read(), 5) == b""  # the server closed its end
    finally:
        writer.close()
    assert reported == []


async def test_callers_that_start_it_at_once_share_one_port() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = connect.Server(serve)
    try:
        ports = await asyncio.gather(*(server.start("127.0.0.1", 0) for _ in range(8)))
        assert set(ports) == {server.port}
    finally:
        await server.close()
