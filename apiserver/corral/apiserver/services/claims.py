"""One Cluster per downstream cluster, whichever URL or credential an import uses.

A cluster is known by the uid of its `kube-system` namespace (`kube.agent.identify`). An
import claims it by creating a Secret whose name is derived from that uid: Kubernetes
refuses a second object of one name, so two imports of one cluster cannot both pass, on any
API server replica, where a look at the Clusters before creating would race. The claim is
owned by its Cluster once that exists, so it goes only after the Cluster has gone, that is
after the operator has removed corral's agent from the cluster: a new import can never have
its agent removed by the deletion of an old Cluster.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections.abc import AsyncIterator

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace, Secret

from corral.core import errors
from corral.core.api import names
from corral.core.kube import kinds
from corral.core.kube.claims import (
    ANNOTATION_CLAIMED_AT,
    claim_name,
    claim_object,
    holder,
    own,
    utc_now,
)
from corral.core.kube.client import delete_if_present
from corral.core.kube.informer import Obj

log = logging.getLogger(__name__)

# An import takes two minutes at most; a claim older than this with no Cluster behind it was
# left by an API server that stopped in the middle of one.
ABANDONED_AFTER = datetime.timedelta(minutes=10)


@contextlib.asynccontextmanager
async def claimed(kube: AsyncClient, identity: str, cluster_id: str) -> AsyncIterator[None]:
    """The cluster claimed for `cluster_id` while the body runs, and released if it fails;
    409 `AlreadyExists` naming the cluster that has it."""
    await _refuse_management_cluster(kube, identity)
    await _claim(kube, identity, cluster_id)
    try:
        yield
    except BaseException:
        await delete_if_present(
            kube, Secret, claim_name(identity), namespace=names.SYSTEM_NAMESPACE
        )
        raise


async def owned(kube: AsyncClient, identity: str, cluster: Obj) -> None:
    """Hand the claim to its Cluster, so that it goes with it."""
    try:
        await own(kube, identity, cluster)
    except KubeApiError as exc:
        # The Cluster stands; an unowned claim is only taken over once the Cluster is gone.
        name = cluster["metadata"]["name"]
        log.warning("cluster %s: its claim keeps no owner: %s", name, exc.status.message)


async def _refuse_management_cluster(kube: AsyncClient, identity: str) -> None:
    system = await kube.get(Namespace, "kube-system")
    if system.metadata is not None and system.metadata.uid == identity:
        raise errors.conflict(
            f"this is corral's management cluster, registered as {names.LOCAL_CLUSTER}"
        )


async def _claim(kube: AsyncClient, identity: str, cluster_id: str) -> None:
    name = claim_name(identity)
    try:
        await kube.create(claim_object(identity, cluster_id))
        return
    except KubeApiError as exc:
        if exc.status.code != 409:
            raise
    try:
        current = await kube.get(Secret, name, namespace=names.SYSTEM_NAMESPACE)
    except KubeApiError as exc:
        if exc.status.code == 404:  # released a moment ago by a failed import
            raise errors.conflict("this cluster is being imported right now") from None
        raise
    held_by = holder(current)
    if not await _abandoned(kube, current, held_by):
        raise errors.conflict(f"this cluster is already imported as {held_by}")
    version = current.metadata.resourceVersion if current.metadata else None
    replacement = claim_object(identity, cluster_id, resource_version=version)
    try:
        # The resourceVersion makes the take-over conditional: one importer wins it.
        await kube.replace(replacement)
    except KubeApiError as exc:
        if exc.status.code == 409:
            raise errors.conflict("this cluster is being imported right now") from None
        raise


async def _abandoned(kube: AsyncClient, claim: Secret, holder: str) -> bool:
    meta = claim.metadata
    if meta is None or meta.ownerReferences or not holder:
        return False
    try:
        claimed_at = datetime.datetime.fromisoformat(
            (meta.annotations or {}).get(ANNOTATION_CLAIMED_AT, "")
        )
    except ValueError:
        claimed_at = datetime.datetime.min
    if utc_now() - claimed_at.replace(tzinfo=claimed_at.tzinfo or datetime.UTC) < ABANDONED_AFTER:
        return False
    try:
        await kube.get(kinds.Cluster, holder)
    except KubeApiError as exc:
        if exc.status.code == 404:
            return True
        raise
    return False
