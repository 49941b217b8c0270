"""The claim on a downstream cluster's identity: one Secret in the system namespace per
cluster, named from the uid of its `kube-system` namespace, so that Kubernetes refuses a
second one. The API server makes it on import (`corral.apiserver.services.claims`); the
operator makes it for a cluster imported before claims existed (`backfill`). Either way the
Cluster owns it, so it goes only once the Cluster has gone.
"""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.core.api import drivers, names
from corral.core.kube import kinds
from corral.core.kube.informer import Obj

CLAIM_TYPE = "management.svc.io/cluster-claim"
# On the claim: the Cluster that has it, and since when; on the Cluster: its identity.
ANNOTATION_CLUSTER = "management.svc.io/cluster-id"
ANNOTATION_CLAIMED_AT = "management.svc.io/claimed-at"
ANNOTATION_IDENTITY = "management.svc.io/kube-system-uid"


def claim_name(identity: str) -> str:
    return "cluster-claim-" + hashlib.sha256(identity.encode()).hexdigest()[:40]


def owner_reference(cluster: Obj) -> dict[str, Any]:
    meta = cluster["metadata"]
    return {"apiVersion": names.API_VERSION, "kind": names.CLUSTER.kind,
            "name": meta["name"], "uid": meta["uid"]}  # fmt: skip


def claim_object(
    identity: str,
    cluster_id: str,
    *,
    owner: Obj | None = None,
    resource_version: str | None = None,
    now: datetime.datetime | None = None,
) -> Secret:
    """The claim of `identity` for `cluster_id`, owned by the Cluster `owner` when it exists."""
    annotations = {
        ANNOTATION_CLUSTER: cluster_id,
        ANNOTATION_IDENTITY: identity,
        ANNOTATION_CLAIMED_AT: (now or utc_now()).isoformat(),
    }
    owners = [OwnerReference(**owner_reference(owner))] if owner is not None else None
    metadata = ObjectMeta(
        name=claim_name(identity),
        namespace=names.SYSTEM_NAMESPACE,
        annotations=annotations,
        ownerReferences=owners,
        resourceVersion=resource_version,
    )
    return Secret(metadata=metadata, type=CLAIM_TYPE)


def holder(claim: Secret) -> str:
    """The id of the Cluster that has the claim; empty when it names none."""
    annotations = (claim.metadata.annotations if claim.metadata else None) or {}
    return str(annotations.get(ANNOTATION_CLUSTER, ""))


def unclaimed(cluster: Obj) -> bool:
    """An imported Cluster that records no identity: imported before claims existed."""
    annotations = cluster["metadata"].get("annotations") or {}
    imported = cluster["spec"].get("driver") == drivers.IMPORTED
    return imported and ANNOTATION_IDENTITY not in annotations


async def own(kube: AsyncClient, identity: str, cluster: Obj) -> None:
    """Hand the claim to its Cluster, so that it goes with it."""
    await kube.patch(
        Secret,
        claim_name(identity),
        {"metadata": {"ownerReferences": [owner_reference(cluster)]}},
        namespace=names.SYSTEM_NAMESPACE,
        patch_type=PatchType.MERGE,
    )


async def backfill(kube: AsyncClient, identity: str, cluster: Obj) -> str | None:
    """Claim `identity` for the existing `cluster` and record it on the Cluster, as an import
    does; a claim another Cluster has is left alone, and its holder returned (None when the
    cluster's claim and annotation are in place)."""
    name = cluster["metadata"]["name"]
    try:
        await kube.create(claim_object(identity, name, owner=cluster))
    except ApiError as exc:
        if exc.status.code != 409:
            raise
        current = await kube.get(Secret, claim_name(identity), namespace=names.SYSTEM_NAMESPACE)
        if holder(current) != name:
            return holder(current) or "an unnamed claim"
        if not (current.metadata and current.metadata.ownerReferences):
            await own(kube, identity, cluster)
    await kube.patch(
        kinds.Cluster,
        name,
        {"metadata": {"annotations": {ANNOTATION_IDENTITY: identity}}},
        patch_type=PatchType.MERGE,
    )
    return None


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
