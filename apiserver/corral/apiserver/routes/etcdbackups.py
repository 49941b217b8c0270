"""`/v3/etcdbackups`: the etcd backups of provisioned clusters (docs/api.md, "etcd backups").

A backup is an EtcdBackup in the namespace named after its cluster; its id is
`<cluster>:<name>`. The cluster's members see its backups; its owners (and administrators)
delete them. `backupEtcd` on the cluster makes one (`services.etcdbackups`).
"""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.urls import v3
from corral.apiserver.services.etcdbackups import RESTORE_INPUT as RESTORE_INPUT
from corral.apiserver.services.etcdbackups import SCHEMA as SCHEMA
from corral.apiserver.services.etcdbackups import backup_id, fields, render
from corral.apiserver.services.visibility import owned_cluster
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube import kinds
from corral.core.kube.client import delete_if_present
from corral.core.kube.informer import Obj, key_of

routes = web.RouteTableDef()


async def found(request: web.Request, change: str | None = None) -> Obj:
    """The backup the path names, for the cluster's members (404 for anyone else, whether it
    exists or not); with `change`, the caller must own the cluster (403)."""
    bid = ScopedId.parse_or_none(request.match_info["id"])
    obj = request.app[DEPS].stores.etcdbackups.get(bid.key) if bid else None
    if bid is None or obj is None or access(request).cluster_role(bid.namespace) is None:
        raise errors.not_found(f"etcd backup {request.match_info['id']} not found")
    if change is not None:
        owned_cluster(deps(request), caller(request), bid.namespace, change)
    return obj


@routes.get(v3("etcdbackups"))
async def list_backups(request: web.Request) -> web.Response:
    allowed = access(request)
    cluster = request.query.get("clusterId")
    stores = request.app[DEPS].stores
    objs = stores.etcdbackups.by_index("cluster", cluster) if cluster else stores.etcdbackups.all()
    body = envelope.collection(
        base_url(request), SCHEMA,
        (o for o in objs if allowed.cluster_role(o["metadata"]["namespace"]) is not None),
        backup_id, fields, lambda o: render(request, o), request.query, request.path,
        can_create=False,
    )  # fmt: skip
    return web.json_response(body)


@routes.get(v3("etcdbackups", "/{id}"))
async def get_backup(request: web.Request) -> web.Response:
    return web.json_response(render(request, await found(request)))


@routes.delete(v3("etcdbackups", "/{id}"))
async def delete_backup(request: web.Request) -> web.Response:
    obj = await found(request, "delete its etcd backups")
    meta = obj["metadata"]
    await delete_if_present(
        request.app[DEPS].kube, kinds.EtcdBackup, meta["name"], meta["namespace"]
    )
    request.app[DEPS].stores.etcdbackups.forget(key_of(obj))
    return web.Response(status=204)
