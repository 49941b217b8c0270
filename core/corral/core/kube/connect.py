"""The HTTP CONNECT requests corral's tunnel proxies take (`tunnel_proxy`, this process's own;
`tunnels`, the relay other processes reach): one request line and a few headers, parsed by
h11, authorised with `Proxy-Authorization: Basic <cluster>:<key>`."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac

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
