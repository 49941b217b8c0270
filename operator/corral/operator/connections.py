"""Credentials of downstream clusters, read from their Secrets (or, for `local`, the
operator's own connection to the management cluster)."""

from __future__ import annotations

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.kube.credential import from_environment


async def credential(kube: AsyncClient, cluster_id: str) -> Credential | None:
    """The cluster's credential; None while it has none."""
    if cluster_id == names.LOCAL_CLUSTER:
        return from_environment()
    try:
        secret = await kube.get(
            Secret, names.credential_secret_name(cluster_id),
            namespace=names.SYSTEM_NAMESPACE,
        )  # fmt: skip
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return Credential.from_secret_data(secret.data or {})
