"""Serving the application over TLS, with the API's own answer to requests aiohttp cannot parse.

aiohttp answers a malformed request head (a header line over its limit, a bad request line)
before any middleware runs, with a text/plain 400 that quotes the offending bytes, and logs the
same text: for an oversized `Cookie` or `Authorization` header that is a credential, sent back
and written to the log. aiohttp offers no hook for this (aio-libs/aiohttp#3287), so the request
handler is subclassed: the answer is the `/v3` error body, and the log names the kind of error
and the client, never the bytes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from aiohttp import web
from aiohttp.web_request import BaseRequest

from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.errors import ApiError

log = logging.getLogger(__name__)

SERVER_NAME = "corral"
# Connections waiting to be accepted (aiohttp's own default).
BACKLOG = 128


def malformed_request(status: int) -> ApiError:
    """What a client gets for a request head that could not be parsed."""
    if status == HTTPStatus.INTERNAL_SERVER_ERROR:
        return ApiError(500, "ServerError", "internal server error")
    return ApiError(status, "BadRequest", "malformed request: a request or header line is "
                    "invalid or longer than 8190 bytes")  # fmt: skip


class _RequestHandler(web.RequestHandler):
    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        kind = type(exc).__name__ if exc else HTTPStatus(status).phrase
        log.warning("refused a malformed request from %s: %s", request.remote, kind)
        error = malformed_request(status)
        response = json_response(error.body(), status=error.status)
        response.headers["Server"] = SERVER_NAME
        response.force_close()
        return response


class _Server(web.Server):
    def __call__(self) -> web.RequestHandler:
        return _RequestHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        made = await super()._make_server()
        return _Server(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=made._loop,
            **made._kwargs,
        )


def standard_headers(response: web.StreamResponse) -> None:
    """Every answer: no version banner, and never cached (bodies carry per-user data and, on
    login and token creation, credentials) unless its handler chose otherwise (the console's
    static files, the same for everyone)."""
    response.headers["Server"] = SERVER_NAME
    response.headers.setdefault("Cache-Control", "no-store")


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before any worker starts so that all of them accept on it."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    return socket.create_server(address, family=family, backlog=BACKLOG)


async def start(
    app: web.Application, sock: socket.socket, context: ssl.SSLContext | None = None
) -> web.AppRunner:
    """Start serving on `sock` in the running loop; the caller cleans the runner up."""
    runner = _Runner(app, access_log=None)
    await runner.setup()
    await _accept(runner, sock, context)
    return runner


async def serve(
    app: web.Application,
    sock: socket.socket,
    context: ssl.SSLContext,
    supervisor: int | None = None,
    ready: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM, then close connections and run the cleanup contexts.

    A worker of a supervisor (`supervisor`: a pipe whose other end only the supervisor holds)
    stops as well when that pipe ends, so no worker outlives a supervisor killed outright; and
    it accepts connections only once `ready` returns: the port is shared, and a worker just
    (re)started with empty caches would answer for the others what it does not know yet.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if supervisor is not None:
        loop.add_reader(supervisor, stop.set)
    runner = _Runner(app, access_log=None)
    await runner.setup()
    try:
        if ready is not None:
            await _first(ready(), stop.wait())
        if not stop.is_set():
            await _accept(runner, sock, context)
            await stop.wait()
    finally:
        if supervisor is not None:
            loop.remove_reader(supervisor)
        await runner.cleanup()


async def _accept(
    runner: web.AppRunner, sock: socket.socket, context: ssl.SSLContext | None
) -> None:
    await web.SockSite(runner, sock, ssl_context=context, backlog=BACKLOG).start()


async def _first(*awaitables: Awaitable[object]) -> None:
    """Wait until one of `awaitables` is done; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
