"""The connection to the management cluster."""

from __future__ import annotations

from lightkube import AsyncClient, KubeConfig

FIELD_MANAGER = "corral"


def async_client() -> AsyncClient:
    """A client for the management cluster: in-cluster service account, else $KUBECONFIG."""
    return AsyncClient(KubeConfig.from_env(), field_manager=FIELD_MANAGER)
