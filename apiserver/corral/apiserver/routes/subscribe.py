"""`GET /v3/subscribe`: changes as they happen, over a WebSocket, in Rancher's shape.

Each text message is `{"name": "resource.create" | "resource.change" | "resource.remove",
"resourceType": "cluster" | "node" | "nodePool" | "project" | "projectRoleTemplateBinding" |
"clusterRoleTemplateBinding" | "workload" | "pod", "data": <the resource as /v3 shows it to
this caller>}`, and every `PING_SECONDS` of quiet `{"name": "ping", "data": {}}`.
`?resourceTypes=` and `?eventNames=` (each repeatable) narrow what is sent. A caller gets an
event only of an object the API would show them, judged with their access as it is at that
event, so a binding removed stops the events at once.

The credential is checked again while the socket is open (`_Session`): a session that ends
(logout, expiry, a disabled user) closes the socket with 1008 before any further event, and the
client learns why from `/v3`. A subscriber too far behind is closed with 1013: its
client subscribes again and reads its lists afresh, as a slow Kubernetes watcher relists.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Collection, Iterable

from aiohttp import WSCloseCode, web

from corral.apiserver.auth.authn import identify, principal
from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import deps
from corral.apiserver.http import websockets
from corral.apiserver.http.errors import ApiError
from corral.apiserver.resources import handlers
from corral.apiserver.resources.subscriptions import EVENT_NAMES, SUBSCRIBABLE, Offered
from corral.apiserver.state.changes import Change, Subscriber
from corral.core import errors

PING_SECONDS = 10.0
VERIFY_SECONDS = 1.0
# A client has nothing to say on this socket; a message larger than this closes it.
MESSAGE_LIMIT = 4096
PING = json.dumps({"name": "ping", "data": {}})

routes = web.RouteTableDef()


@routes.get("/v3/subscribe")
async def subscribe(request: web.Request) -> web.StreamResponse:
    held = deps(request)
    websockets.check_handshake(request, principal(request).via_cookie, held.external_url)
    offered = request.app[SUBSCRIBABLE]
    wanted = chosen(offered, request.query.getall("resourceTypes", []), "resourceTypes")
    names = set(chosen(EVENT_NAMES.values(), request.query.getall("eventNames", []), "eventNames"))
    socket = web.WebSocketResponse(max_msg_size=MESSAGE_LIMIT)
    # Subscribed before the handshake: a client that reads its lists once the socket opens
    # then also gets every change made after its read, whatever the handshake waited for.
    with held.stores.changes.subscribe() as subscriber:
        await socket.prepare(request)
        sender = asyncio.create_task(
            _deliver(request, socket, subscriber, [offered[t] for t in wanted], names)
        )
        try:
            async for _message in socket:  # nothing is read: this ends when the client closes
                pass
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
    return socket


def chosen(offered: Iterable[str], asked: list[str], field: str) -> list[str]:
    """What the query narrows to (all that is offered when it names none); 422 for a name
    that is not offered."""
    known = list(offered)
    for name in asked:
        if name not in known:
            raise errors.invalid(field, f"{field}: {name} is not one of {', '.join(known)}",
                                 "InvalidOption")  # fmt: skip
    return [name for name in known if name in asked] if asked else known


async def _deliver(
    request: web.Request,
    socket: web.WebSocketResponse,
    subscriber: Subscriber,
    subscribables: list[Offered],
    names: Collection[str],
) -> None:
    ask = handlers.ask(request)
    session = _Session(request)
    while not socket.closed:
        try:
            async with asyncio.timeout(PING_SECONDS):
                change: Change | None = await subscriber.queue.get()
        except TimeoutError:
            change = None
        if subscriber.overflowed.is_set():
            await socket.close(code=WSCloseCode.TRY_AGAIN_LATER,
                               message=b"too far behind: subscribe again")  # fmt: skip
            return
        try:
            ask = ask._replace(who=session.caller(), now=datetime.datetime.now(datetime.UTC))
        except ApiError:
            await socket.close(code=WSCloseCode.POLICY_VIOLATION, message=b"session ended")
            return
        if change is None:
            await socket.send_str(PING)
            continue
        for subscribable in subscribables:
            event = await subscribable.event(ask, change)
            if event is not None and event["name"] in names:
                await socket.send_str(json.dumps(event))


class _Session:
    """The subscriber as they are now, asked before every event and ping.

    The credential is checked in full (not counted as activity) when its token or its user
    changed in the caches, and at least every `VERIFY_SECONDS` for what time alone ends
    (expiry, idleness); their access is read each time (memoised until a binding changes),
    so a binding removed a moment ago counts for the next event."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._held = deps(request)
        self._who = principal(request)
        self._seen = self._objects()
        self._checked = time.monotonic()

    def _objects(self) -> tuple[object, object]:
        stores = self._held.stores
        return stores.tokens.get(self._who.token.name), stores.users.get(self._who.user_id)

    def caller(self) -> Caller:
        seen = self._objects()
        stale = time.monotonic() - self._checked >= VERIFY_SECONDS
        if stale or any(now is not then for now, then in zip(seen, self._seen, strict=True)):
            now = datetime.datetime.now(datetime.UTC)
            held = self._held
            self._who = identify(self._request, held.stores, held.activity, held.verified, now)
            self._seen, self._checked = seen, time.monotonic()
        stores = self._held.stores
        is_admin = stores.is_admin(self._who.user_id)
        who = self._who if is_admin == self._who.is_admin else self._who._replace(is_admin=is_admin)
        return Caller(who, self._held.access.get(who.user_id, is_admin, stores))
