"""One tunnel: an HTTP/2 connection (h2, sans-IO) over a carrier of binary messages (the
agent's WebSocket), whose streams are byte pipes (docs/design/cluster-agent.md, section 2).

corral is the client and opens streams with `open()`; the agent is the server and is handed
each stream corral opens. A stream is a `CONNECT` to `AUTHORITY`, answered 200 once the
agent's side is up. Flow control is HTTP/2's: a stream's bytes are acknowledged only when its
reader takes them, so each stream holds back its own sender and nobody else's, and the
connection window, the sum of the streams', never stalls the others.

Nothing here knows WebSockets or sockets: the carrier is two coroutines, so the rules are
tested in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from hpack.struct import Header

# The one destination a stream may name: the agent's own API server.
AUTHORITY = "apiserver"
# HTTP/2's smallest allowed frame size: no peer needs bigger, and it bounds each read.
MAX_FRAME = 16 * 1024
MAX_HEADER_LIST = 8 * 1024
MAX_STREAMS = 100
STREAM_WINDOW = 256 * 1024
# The sum of the stream windows, so one stalled stream never holds back the others; it is
# also the most a peer can make this side buffer.
CONNECTION_WINDOW = MAX_STREAMS * STREAM_WINDOW
# What one carrier message holds at most; a peer's bigger message ends the tunnel.
MAX_MESSAGE = 64 * 1024
_DEFAULT_WINDOW = 65535
FRAME_HEADER = 9
# What a client sends before its first frame (RFC 9113, section 3.4).
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Carrier(Protocol):
    """Binary messages in order, both ways."""

    async def send(self, data: bytes) -> None: ...

    async def receive(self) -> bytes | None:
        """The next message; None once the carrier is closed."""
        ...


class TunnelClosed(ConnectionError):
    """The tunnel ended (closed, or its carrier failed); every stream in it ends with it."""


class ProtocolViolation(TunnelClosed):
    """The peer broke HTTP/2 or the bounds: the tunnel ends with GOAWAY and this code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


class StreamRefused(ConnectionError):
    """The agent did not open the stream (its status, or the stream was reset)."""


Accept = Callable[["Stream"], Awaitable[None]]


class Stream:
    """One byte pipe of the tunnel. `read` returns b"" at the peer's end; `write` waits while
    the peer's window is full; `end` half-closes; `reset` aborts both ways."""

    def __init__(self, tunnel: Tunnel, stream_id: int) -> None:
        self._tunnel = tunnel
        self.id = stream_id
        self._chunks: deque[tuple[bytes, int]] = deque()
        self._readable = asyncio.Event()
        self._window = asyncio.Event()
        self._ended = False  # the peer sent END_STREAM
        self._error: ConnectionError | None = None
        self.answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def read(self) -> bytes:
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._ended:
                return b""
            self._readable.clear()
            await self._readable.wait()
        data, flow = self._chunks.popleft()
        await self._tunnel._acknowledge(self.id, flow)
        return data

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            size = self._tunnel._sendable(self)
            if size == 0:
                self._window.clear()
                await self._window.wait()
                continue
            await self._tunnel._send_data(self.id, bytes(view[:size]))
            view = view[size:]

    async def end(self) -> None:
        """No more bytes from this side."""
        await self._tunnel._end(self.id)

    async def reset(self) -> None:
        await self._tunnel._reset(self.id)

    async def respond(self, status: int) -> None:
        """The agent's answer to the stream's CONNECT: 200 opens it, anything else ends it."""
        await self._tunnel._respond(self.id, status)

    def _received(self, data: bytes, flow: int) -> None:
        self._chunks.append((data, flow))
        self._readable.set()

    def _finish(self, error: ConnectionError | None = None) -> None:
        if error is not None and self._error is None:
            self._error = error
        self._ended = True
        self._readable.set()
        self._window.set()
        if not self.answered.done():
            self.answered.set_exception(error or StreamRefused("the stream ended unanswered"))
            self.answered.exception()  # retrieved: nobody may be waiting for it


class FrameLengths:
    """Each frame's announced length, checked as soon as its header arrives. h2 buffers a
    frame whole before it checks the length, so a peer announcing 16 MiB would be buffered up
    to that; here it ends the tunnel at the header."""

    def __init__(self, skip: int) -> None:
        self._skip = skip  # bytes of the current frame's body (or the preface) still to come
        self._header = bytearray()

    def over_bound(self, data: bytes) -> int | None:
        """The first announced length over `MAX_FRAME` in `data`; None when all are within."""
        position = 0
        while position < len(data):
            if self._skip:
                taken = min(self._skip, len(data) - position)
                self._skip -= taken
                position += taken
                continue
            wanted = FRAME_HEADER - len(self._header)
            self._header += data[position : position + wanted]
            position += wanted
            if len(self._header) == FRAME_HEADER:
                length = int.from_bytes(self._header[:3], "big")
                if length > MAX_FRAME:
                    return length
                self._skip = length
                self._header.clear()
        return None


class Tunnel:
    """Either side of one tunnel: `client=True` for corral, which opens streams; the agent
    passes `accept`, run once per stream corral opens. `run()` reads the carrier until it ends
    and raises `ProtocolViolation` for a peer that broke the rules."""

    def __init__(self, carrier: Carrier, *, client: bool, accept: Accept | None = None) -> None:
        config = h2.config.H2Configuration(client_side=client, header_encoding=None)
        self._h2 = h2.connection.H2Connection(config=config)
        self._carrier = carrier
        self._client = client
        self._accept = accept
        self._streams: dict[int, Stream] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._send_lock = asyncio.Lock()
        self._slots = asyncio.Event()
        self._closed: TunnelClosed | None = None
        self._started = False
        self._frames = FrameLengths(skip=0 if client else len(PREFACE))

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def start(self) -> None:
        """Sends the preface and this side's settings (the bounds) once."""
        if self._started:
            return
        self._started = True
        self._h2.initiate_connection()
        self._h2.update_settings(
            {
                h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_FRAME,
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
                h2.settings.SettingCodes.ENABLE_PUSH: 0,
            }
        )
        self._h2.increment_flow_control_window(CONNECTION_WINDOW - _DEFAULT_WINDOW)
        await self._flush()

    async def run(self) -> None:
        await self.start()
        try:
            while True:
                message = await self._carrier.receive()
                if message is None:
                    break
                try:
                    if len(message) > MAX_MESSAGE:
                        self._h2.close_connection(h2.errors.ErrorCodes.FRAME_SIZE_ERROR)
                        raise ProtocolViolation(
                            f"a message of {len(message)} bytes is over {MAX_MESSAGE}",
                            h2.errors.ErrorCodes.FRAME_SIZE_ERROR,
                        )
                    if (length := self._frames.over_bound(message)) is not None:
                        self._h2.close_connection(h2.errors.ErrorCodes.FRAME_SIZE_ERROR)
                        raise ProtocolViolation(
                            f"a frame of {length} bytes is over {MAX_FRAME}",
                            h2.errors.ErrorCodes.FRAME_SIZE_ERROR,
                        )
                    try:
                        events = self._h2.receive_data(message)
                    except h2.exceptions.ProtocolError as exc:
                        # h2 queues its GOAWAY for most errors, not for a bad preface; a
                        # second is refused by its state machine.
                        with contextlib.suppress(h2.exceptions.ProtocolError):
                            self._h2.close_connection(exc.error_code)
                        raise ProtocolViolation(str(exc), int(exc.error_code)) from None
                except ProtocolViolation:
                    with contextlib.suppress(ConnectionError):
                        await self._flush()
                    raise
                for event in events:
                    await self._handle(event)
                if self._closed is not None:
                    break
                await self._flush()
        finally:
            self._end_all(TunnelClosed("the tunnel closed"))

    async def open(self) -> Stream:
        """A new stream to the agent's API server, once the agent says it is connected.
        Waits for a free stream while the agent's limit is reached."""
        if not self._client:
            raise RuntimeError("only corral's side opens streams")
        await self.start()
        while True:
            self._raise_if_closed()
            if self._h2.open_outbound_streams < self._h2.remote_settings.max_concurrent_streams:
                break
            self._slots.clear()
            await self._slots.wait()
        stream_id = self._h2.get_next_available_stream_id()
        stream = self._streams[stream_id] = Stream(self, stream_id)
        self._h2.send_headers(stream_id, [(":method", "CONNECT"), (":authority", AUTHORITY)])
        await self._flush()
        status = await stream.answered
        if status != 200:
            raise StreamRefused(f"the agent answered {status}")
        return stream

    async def close(self) -> None:
        """GOAWAY, then every stream ends; the carrier is its owner's to close."""
        if self._closed is None:
            with contextlib.suppress(ConnectionError, h2.exceptions.ProtocolError):
                self._h2.close_connection()
                await self._flush()
        self._end_all(TunnelClosed("the tunnel closed"))
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    # -- what streams call ------------------------------------------------------------------

    def _sendable(self, stream: Stream) -> int:
        """How much of the stream's data may go now: 0 while the windows are full."""
        self._raise_if_closed()
        if stream._error is not None:
            raise stream._error
        try:
            window = self._h2.local_flow_control_window(stream.id)
        except h2.exceptions.StreamClosedError:
            raise StreamRefused("the stream was closed") from None
        return min(window, self._h2.max_outbound_frame_size)

    async def _send_data(self, stream_id: int, data: bytes) -> None:
        self._guarded(lambda: self._h2.send_data(stream_id, data))
        await self._flush()

    async def _acknowledge(self, stream_id: int, flow: int) -> None:
        if self._closed is None and flow:
            self._h2.acknowledge_received_data(flow, stream_id)
            await self._flush()

    async def _end(self, stream_id: int) -> None:
        self._guarded(lambda: self._h2.end_stream(stream_id))
        await self._flush()
        self._forget_if_closed(stream_id)

    async def _reset(self, stream_id: int) -> None:
        stream = self._streams.pop(stream_id, None)
        if stream is not None:
            stream._finish(StreamRefused("the stream was reset"))
        if self._closed is None:
            with contextlib.suppress(h2.exceptions.StreamClosedError):
                self._h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
            await self._flush()
        self._slots.set()

    async def _respond(self, stream_id: int, status: int) -> None:
        end = status != 200
        self._guarded(
            lambda: self._h2.send_headers(stream_id, [(":status", str(status))], end_stream=end)
        )
        await self._flush()
        if end:
            self._forget_if_closed(stream_id)

    # -- the connection ---------------------------------------------------------------------

    async def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            await self._requested(event)
        elif isinstance(event, h2.events.ResponseReceived):
            stream = self._streams.get(event.stream_id or 0)
            status = _headers(event.headers).get(b":status", b"")
            if stream is not None and not stream.answered.done():
                stream.answered.set_result(int(status) if status.isdigit() else 0)
        elif isinstance(event, h2.events.DataReceived):
            stream = self._streams.get(event.stream_id)
            flow = event.flow_controlled_length or 0
            if stream is None:
                # A stream this side already let go of: its bytes are dropped, the window not.
                self._h2.acknowledge_received_data(flow, event.stream_id or 0)
            else:
                stream._received(event.data or b"", flow)
        elif isinstance(event, h2.events.StreamEnded):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream._finish()
            self._forget_if_closed(event.stream_id)
        elif isinstance(event, h2.events.StreamReset):
            stream = self._streams.pop(event.stream_id or 0, None)
            if stream is not None:
                stream._finish(StreamRefused("the peer reset the stream"))
            self._slots.set()
        elif isinstance(event, h2.events.WindowUpdated):
            targets = (
                self._streams.values()
                if not event.stream_id
                else [s for s in [self._streams.get(event.stream_id)] if s]
            )
            for stream in targets:
                stream._window.set()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            for stream in self._streams.values():
                stream._window.set()
            self._slots.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            if event.error_code:
                raise ProtocolViolation("the peer ended the tunnel", int(event.error_code))
            self._end_all(TunnelClosed("the peer ended the tunnel"))

    async def _requested(self, event: h2.events.RequestReceived) -> None:
        stream_id = event.stream_id or 0
        headers = _headers(event.headers)
        if self._accept is None or headers.get(b":method") != b"CONNECT":
            await self._respond(stream_id, 400)
            return
        if headers.get(b":authority") != AUTHORITY.encode():
            await self._respond(stream_id, 400)
            return
        stream = self._streams[stream_id] = Stream(self, stream_id)
        task = asyncio.create_task(self._serve(stream, self._accept))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _serve(self, stream: Stream, accept: Accept) -> None:
        try:
            await accept(stream)
        except ConnectionError:
            pass
        finally:
            if stream.id in self._streams and self._closed is None:
                await self._reset(stream.id)

    def _forget_if_closed(self, stream_id: int | None) -> None:
        stream_id = stream_id or 0
        h2_stream = self._h2.streams.get(stream_id)
        if h2_stream is None or h2_stream.closed:
            stream = self._streams.pop(stream_id, None)
            if stream is not None:
                stream._finish()
            self._slots.set()

    def _guarded(self, action: Callable[[], object]) -> None:
        self._raise_if_closed()
        try:
            action()
        except h2.exceptions.StreamClosedError:
            raise StreamRefused("the stream was closed") from None

    async def _flush(self) -> None:
        async with self._send_lock:
            while data := self._h2.data_to_send(MAX_MESSAGE):
                try:
                    await self._carrier.send(data)
                except ConnectionError as exc:
                    self._end_all(TunnelClosed(f"the carrier failed: {exc}"))
                    raise self._closed or TunnelClosed("the tunnel closed") from None

    def _raise_if_closed(self) -> None:
        if self._closed is not None:
            raise self._closed

    def _end_all(self, error: TunnelClosed) -> None:
        if self._closed is None:
            self._closed = error
        for stream in self._streams.values():
            stream._finish(error)
        self._streams.clear()
        self._slots.set()


def _headers(headers: list[Header] | None) -> dict[bytes, bytes]:
    # Without a header encoding h2 hands names and values over as bytes.
    return {bytes(name): bytes(value) for name, value in headers or []}
