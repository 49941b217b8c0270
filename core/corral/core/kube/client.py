"""The connection to the management cluster."""

from __future__ import annotations

from typing import Any

from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace

FIELD_MANAGER = "corral"


def async_client() -> AsyncClient:
    """A client for the management cluster: in-cluster service account, else $KUBECONFIG."""
    return AsyncClient(KubeConfig.from_env(), field_manager=FIELD_MANAGER)


def as_dict(obj: Any) -> dict[str, Any]:
    """A lightkube object as a plain dict (generic resources already are one)."""
    data: dict[str, Any] = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return data


async def delete_if_present(
    client: AsyncClient, resource: Any, name: str, namespace: str | None = None
) -> None:
    """Delete an object; one that is already gone is fine."""
    try:
        await client.delete(resource, name, namespace=namespace)
    except ApiError as exc:
        if exc.status.code != 404:
            raise


async def ensure_namespace(client: AsyncClient, name: str, labels: dict[str, str]) -> None:
    """Create a namespace unless it exists: several writers may race to create it."""
    try:
        await client.create(Namespace(metadata=ObjectMeta(name=name, labels=labels)))
    except ApiError as exc:
        if exc.status.code != 409:
            raise
