"""What every view of a cluster does the same way (`/v3/clusters` and
`/v1/provisioning.svc.io.clusters`)."""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.deps import DEPS
from corral.core import errors
from corral.core.api import names
from corral.core.kube import kinds
from corral.core.kube.client import delete_if_present
from corral.core.kube.informer import Obj


async def delete(request: web.Request, obj: Obj) -> None:
    """Deletes the cluster: the operator then removes its machines, pools, control plane and
    namespace (`management.clusters.forget_cluster`). The caller has checked ownership."""
    if obj["metadata"]["name"] == names.LOCAL_CLUSTER:
        raise errors.Unsupported("the local cluster cannot be deleted")
    await delete_if_present(request.app[DEPS].kube, kinds.Cluster, obj["metadata"]["name"])
