"""`/k8s/clusters/{cluster_id}/…`: the Kubernetes API of a downstream cluster, through corral.

The caller authenticates with a corral token (a kubeconfig token from `generateKubeconfig`,
or any token of theirs; tokens scoped to another cluster are refused by authentication). The
request goes on with corral's own credential for the cluster and impersonates the caller, so
the cluster's RBAC decides: administrators are impersonated into `system:masters`, other
users into `system:authenticated` (and what role bindings give them). Responses stream, so
watches (`?watch=true`) and `logs -f` work. Upgrades (exec, attach, port-forward) do not.

The upstream URL is the cluster's server plus the request's path segments, each decoded and
encoded again as one segment, so no path (`http://…`, `//host`, `http:%2F%2F…`) can name
another server; the session refuses any other origin anyway (`kube.credential.session_for`).
"""

from __future__ import annotations

import logging
from urllib.parse import unquote_to_bytes

import aiohttp
from aiohttp import web
from yarl import URL

from corral.apiserver.auth.authn import PROXY_PATH, principal
from corral.apiserver.http.errors import ApiError
from corral.apiserver.keys import CONNECTIONS
from corral.apiserver.services.visibility import visible_cluster
from corral.core.clusters.credential import Credential

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
ADMIN_GROUPS = ("system:masters", "system:authenticated")
USER_GROUPS = ("system:authenticated",)
# The raw path's parts before the forwarded ones: "/", "k8s", "clusters" and the cluster id.
_PREFIX_PARTS = PROXY_PATH.count("/") + 1


def upstream_url(request: web.Request, credential: Credential) -> URL:
    """Where the request goes: the cluster's own server and the path after the cluster id."""
    segments = [unquote_to_bytes(part) for part in request.rel_url.raw_parts[_PREFIX_PARTS:]]
    try:
        return credential.url(*segments)
    except ValueError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from None


@routes.route("*", PROXY_PATH + "/{path:.*}")
@routes.route("*", PROXY_PATH)
async def proxy(request: web.Request) -> web.StreamResponse:
    who = principal(request)
    cluster = request.match_info["cluster"]
    visible_cluster(request, cluster)
    if request.headers.get("Upgrade"):
        raise ApiError(400, "BadRequest", "exec, attach and port-forward are not proxied yet")
    connection = await request.app[CONNECTIONS].connection(cluster)

    headers = {
        k: v
        for k, v in request.headers.items()
        if k.lower() not in DROPPED_REQUEST and not k.lower().startswith("impersonate-")
    }
    headers["Impersonate-User"] = who.user_id
    groups = ADMIN_GROUPS if who.is_admin else USER_GROUPS
    url = upstream_url(request, connection.credential)
    body = await request.read() if request.can_read_body else None
    session = connection.session()
    try:
        upstream = await session.request(
            request.method,
            url,
            params=request.query,
            data=body,
            headers=[*headers.items(), *(("Impersonate-Group", g) for g in groups)],
            allow_redirects=False,
        )
    except (aiohttp.ClientError, OSError) as exc:
        raise ApiError(
            503, "ClusterUnavailable", f"cannot reach cluster {cluster}: {exc}"
        ) from None
    async with upstream:
        response = web.StreamResponse(
            status=upstream.status,
            headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in DROPPED_RESPONSE
            },
        )
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, ConnectionResetError):
            log.debug("stream from cluster %s ended early", cluster)
        await response.write_eof()
        return response
