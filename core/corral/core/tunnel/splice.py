"""A tunnel stream joined to a socket (asyncio streams) until both directions end: the
agent's connection to its API server, or a connection of corral's clients to the dial
endpoint. Each direction waits on its receiver (the socket's drain, the stream's window), so
the back-pressure of one reaches the other's sender."""

from __future__ import annotations

import asyncio
import contextlib

from corral.core.tunnel.session import MAX_FRAME, Stream


async def splice(
    stream: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Copies both ways; a half close travels as one (END_STREAM, EOF), an error resets the
    stream and closes the socket. Returns once both directions are done; closes the socket."""
    outward = asyncio.create_task(_socket_to_stream(reader, stream))
    inward = asyncio.create_task(_stream_to_socket(stream, writer))
    try:
        done, _ = await asyncio.wait({outward, inward}, return_when=asyncio.FIRST_EXCEPTION)
        if any(task.exception() for task in done):
            await stream.reset()
        else:
            await asyncio.gather(outward, inward)
    except (ConnectionError, asyncio.CancelledError):
        await stream.reset()
        raise
    finally:
        for task in (outward, inward):
            task.cancel()
        await asyncio.gather(outward, inward, return_exceptions=True)
        writer.close()
        # A socket the peer dropped first may say so as ENOTCONN, which is no ConnectionError.
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _socket_to_stream(reader: asyncio.StreamReader, stream: Stream) -> None:
    while data := await reader.read(MAX_FRAME):
        await stream.write(data)
    await stream.end()


async def _stream_to_socket(stream: Stream, writer: asyncio.StreamWriter) -> None:
    while data := await stream.read():
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()
