"""A cluster agent's routes (docs/design/cluster-agent.md): `GET /v3/import/<token>_<cluster>
.yaml`, the manifest that starts it, whose registration token is its only credential; and
`GET /v3/connect`, its tunnel. The agent's credential is its only authentication there; a good
one upgrades to a WebSocket that carries the tunnel, held here until either side ends it or a
newer agent of the cluster replaces it, or its credential is revoked."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from corral.apiserver.deps import deps
from corral.apiserver.http.errors import ApiError
from corral.apiserver.services import tunnels
from corral.core.kube.tunnels import CLOSE_GOING_AWAY, CLOSE_PROTOCOL, Held, WebSocketCarrier
from corral.core.tunnel import handshake, manifest
from corral.core.tunnel.session import MAX_MESSAGE, ProtocolViolation, Tunnel, TunnelClosed

log = logging.getLogger(__name__)

routes = web.RouteTableDef()

# Each side pings this often; a tunnel that misses a pong is closed and the agent dials again.
HEARTBEAT = 10.0
# One answer for every credential that opens nothing: which check failed is not said.
MSG_BAD_CREDENTIAL = "agent credential is not valid"


@routes.get(manifest.PATH_PREFIX + "{name}")
async def import_manifest(http: web.Request) -> web.Response:
    text = await tunnels.import_manifest(deps(http), http.match_info["name"])
    return web.Response(text=text, content_type="application/yaml")


@routes.get(handshake.PATH)
async def connect(http: web.Request) -> web.StreamResponse:
    held = deps(http)
    cluster = tunnels.authenticated(held, http.headers.get("Authorization", ""))
    if cluster is None:
        raise ApiError(401, "Unauthorized", MSG_BAD_CREDENTIAL)
    digest = tunnels.stored_digest(held, cluster)
    agent = tunnels.agent(cluster, http.headers)
    socket = web.WebSocketResponse(max_msg_size=MAX_MESSAGE, heartbeat=HEARTBEAT)
    if not socket.can_prepare(http).ok:
        raise ApiError(400, "InvalidBodyContent", "an agent's tunnel is a WebSocket upgrade")
    await tunnels.store_credential(held, agent)
    await socket.prepare(http)
    tunnel = Tunnel(WebSocketCarrier(socket), client=True)
    running = asyncio.create_task(tunnel.run())
    # The WebSocket is this handler's alone: whoever ends the tunnel (a newer agent, another
    # replica taking it, a shutdown) stops it here, and the handler closes with their code.
    ending = [CLOSE_GOING_AWAY]

    async def close(code: int) -> None:
        ending[0] = code
        running.cancel()

    entry = Held(tunnel, agent.version, agent.image, close,
                 lambda: tunnels.still_authorised(held, cluster, digest))  # fmt: skip
    await held.tunnels.hold(cluster, entry)
    log.info("cluster %s: agent %s connected", cluster, agent.version or "(no version)")
    try:
        await running
    except ProtocolViolation as exc:
        log.warning("cluster %s: its agent broke the tunnel's protocol: %s", cluster, exc)
        # The carrier's codes are WebSocket close codes; h2's are not.
        ending[0] = exc.code if exc.code >= 1000 else CLOSE_PROTOCOL
    except TunnelClosed:
        pass
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the handler itself is cancelled, not only the tunnel
    finally:
        running.cancel()
        await held.tunnels.release(cluster, entry)
        await tunnel.close()
        await socket.close(code=ending[0])
        log.info("cluster %s: agent disconnected", cluster)
    return socket
