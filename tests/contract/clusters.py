"""A provisioned cluster as the provisioner leaves it, for the families that need one (no
operator runs in the contract tier)."""

from __future__ import annotations

import datetime

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

from corral.core.api import condition_types as ct
from corral.core.api import ids, names
from corral.core.conditions import Condition
from corral.core.kube import cluster_secrets, kinds
from corral.core.kube.client import as_dict
from corral.core.kube.credential import from_environment
from corral.core.kube.status import StatusWriter
from corral.core.provisioning import catalog

from .conftest import FIELD_MANAGER

VERSION = catalog.UPSTREAM_VERSION


async def provisioned(
    kube: AsyncClient, version: str = VERSION, ready: bool = True, reachable: bool = True
) -> str:
    """A k3s cluster as the provisioner leaves it: provisioned at `version`, Ready, and
    corral's credential for it (which reaches this management cluster)."""
    cluster_id = "c-m-" + ids.random_suffix(8)
    spec = {"displayName": cluster_id, "driver": "k3s", "kubernetesVersion": version}
    body = as_dict(await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id),
                                                   spec=spec)))  # fmt: skip
    credential = from_environment()
    writer = StatusWriter(kube, FIELD_MANAGER, lambda: datetime.datetime.now(datetime.UTC))
    progress = {"step": "Provisioned", "ready": ready, "endpoint": credential.server,
                "appliedVersion": version}  # fmt: skip
    await writer.apply(kinds.Cluster, cluster_id, seen=body,
                       conditions=[Condition.of(ct.READY, ready, "Ready")],
                       fields={"provisioning": progress})  # fmt: skip
    if reachable:
        await kube.apply(cluster_secrets.credential_secret(body, credential),
                         field_manager=FIELD_MANAGER, force=True)  # fmt: skip
    labels = {names.LABEL_CLUSTER: cluster_id}
    await kube.create(Namespace(metadata=ObjectMeta(name=cluster_id, labels=labels)))
    return cluster_id
