"""`/k8s/clusters/{cluster_id}/…`: the Kubernetes API of a downstream cluster, through corral.

The caller authenticates with a corral token (a kubeconfig token from `generateKubeconfig`,
or any token of theirs; tokens scoped to another cluster are refused by authentication). The
request goes on with corral's own credential for the cluster and impersonates the caller, so
the cluster's RBAC decides: administrators are impersonated into `system:masters`, other
users into `system:authenticated` and the groups their provider put them in (and what role
bindings give them). Responses stream, so watches (`?watch=true`) and `logs -f` work.

WebSocket upgrades (`kubectl exec`, `attach`, `port-forward`: WebSocket since kubectl 1.30/1.31)
are relayed message by message (pings answered by corral on each side, never relayed:
http/websockets.py says why): corral opens its own WebSocket to the cluster with the same
headers, impersonation and path, offering the subprotocols the client offered, and answers the
client with the one the cluster chose. An upgrade the cluster refuses is answered with its
status and body. A browser's upgrade authenticated by the session cookie must carry
corral's own Origin (one with none is refused): a WebSocket handshake carries no CSRF header.

Other upgrades (SPDY) are not relayed. kubectl falls back to SPDY whenever its WebSocket is
refused, and shows the fallback's error: so a SPDY request goes on as a plain request (as any
request does, without its `Upgrade`), and the cluster's refusal (forbidden, no such pod) is
what the caller gets; only the cluster's "Upgrade request required", which says nothing else
stood in the way, becomes corral's own "only WebSocket upgrades are proxied".

The upstream URL is the cluster's server plus the request's path segments, each decoded and
encoded again as one segment, so no path (`http://…`, `//host`, `http:%2F%2F…`) can name
another server; the session refuses any other origin anyway (`kube.credential.session_for`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from urllib.parse import unquote_to_bytes

import aiohttp
from aiohttp import web
from yarl import URL

from corral.apiserver.auth.authn import PROXY_PATH, Principal
from corral.apiserver.deps import caller, deps
from corral.apiserver.http import websockets
from corral.apiserver.http.errors import ApiError
from corral.apiserver.services.visibility import visible_cluster
from corral.core import errors
from corral.core.clusters.credential import Credential
from corral.core.kube.credential import REFUSAL_LIMIT, UpgradeRefused, read_at_most

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

# Never forwarded: the caller's credentials, impersonation it might attempt itself, and
# hop-by-hop headers.
DROPPED_REQUEST = {
    "authorization",
    "cookie",
    "host",
    "connection",
    "upgrade",
    "keep-alive",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "content-length",
}
DROPPED_RESPONSE = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "content-encoding",
    "set-cookie",
}
# Set by aiohttp for corral's own handshake with the cluster.
DROPPED_UPGRADE = {
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
}
# The cluster answers an upgrade (or refuses it) at once; the stream itself has no bound.
HANDSHAKE_TIMEOUT = 30.0
MESSAGE_LIMIT = 4 * 1024 * 1024
# The raw path's parts before the forwarded ones: "/", "k8s", "clusters" and the cluster id.
_PREFIX_PARTS = PROXY_PATH.count("/") + 1


def upstream_url(request: web.Request, credential: Credential) -> URL:
    """Where the request goes: the cluster's own server and the path after the cluster id."""
    segments = [unquote_to_bytes(part) for part in request.rel_url.raw_parts[_PREFIX_PARTS:]]
    try:
        return credential.url(*segments)
    except ValueError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from None


def forwarded_headers(
    request: web.Request, who: Principal, dropped: set[str] = DROPPED_REQUEST
) -> list[tuple[str, str]]:
    """The request's headers as the cluster gets them: the caller's credentials and attempts
    at impersonation dropped, corral's impersonation of the caller added."""
    headers = [
        (k, v)
        for k, v in request.headers.items()
        if k.lower() not in dropped and not k.lower().startswith("impersonate-")
    ]
    return [*headers, *who.downstream().headers()]


@routes.route("*", PROXY_PATH + "/{path:.*}")
@routes.route("*", PROXY_PATH)
async def proxy(request: web.Request) -> web.StreamResponse:
    held, who = deps(request), caller(request)
    cluster = request.match_info["cluster"]
    visible_cluster(held, who, cluster)
    upgrade = request.headers.get("Upgrade")
    websocket = upgrade is not None and upgrade.lower() == "websocket"
    if websocket:
        websockets.check_handshake(request, who.principal.via_cookie, held.external_url)
    connection = await held.connections.connection(cluster)
    url = upstream_url(request, connection.credential)
    session = connection.session()
    if websocket:
        return await relay_websocket(request, who.principal, cluster, session, url)

    body = await request.read() if request.can_read_body else None
    try:
        upstream = await session.request(
            request.method,
            url,
            params=request.query,
            data=body,
            headers=forwarded_headers(request, who.principal),
            allow_redirects=False,
        )
    except (aiohttp.ClientError, OSError) as exc:
        raise errors.Unavailable(f"cannot reach cluster {cluster}: {exc}") from None
    async with upstream:
        if upgrade and upstream.status == 400:
            return await unrelayed_upgrade(upstream, upgrade)
        response = web.StreamResponse(status=upstream.status, headers=kept(upstream.headers))
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, ConnectionResetError):
            log.debug("stream from cluster %s ended early", cluster)
        await response.write_eof()
        return response


async def unrelayed_upgrade(upstream: aiohttp.ClientResponse, upgrade: str) -> web.Response:
    """The cluster's answer to an upgrade other than WebSocket, sent on without the upgrade."""
    body = await read_at_most(upstream, REFUSAL_LIMIT)
    if b"Upgrade request required" in body:
        raise ApiError(400, "BadRequest", f"only WebSocket upgrades are proxied, not {upgrade}")
    return web.Response(status=upstream.status, body=body, headers=kept(upstream.headers))


def kept(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in DROPPED_RESPONSE}


async def relay_websocket(
    request: web.Request, who: Principal, cluster: str, session: aiohttp.ClientSession, url: URL
) -> web.StreamResponse:
    try:
        async with asyncio.timeout(HANDSHAKE_TIMEOUT):
            upstream = await session.ws_connect(
                url,
                protocols=websockets.offered_protocols(request),
                params=request.query,
                headers=forwarded_headers(request, who, DROPPED_REQUEST | DROPPED_UPGRADE),
                max_msg_size=MESSAGE_LIMIT,
            )
    except UpgradeRefused as refused:
        return web.Response(status=refused.status, body=refused.body, headers=kept(refused.headers))
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise errors.Unavailable(f"cannot reach cluster {cluster}: {exc}") from None
    # Who opened which stream (the command of an exec is in the query), never what flows;
    # percent-encoded as it came, so that no line break in a command reaches the log.
    log.info("user %s opened a stream on cluster %s: %s?%s", who.user_id, cluster,
             url.raw_path, request.rel_url.raw_query_string)  # fmt: skip
    client = web.WebSocketResponse(
        protocols=[upstream.protocol] if upstream.protocol else [],
        max_msg_size=MESSAGE_LIMIT,
    )
    try:
        await client.prepare(request)
    except BaseException:
        await upstream.close()
        raise
    await websockets.relay(client, upstream)  # closes both
    return client
