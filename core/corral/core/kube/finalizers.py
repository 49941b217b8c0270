"""Adding and removing one finalizer of corral's on an object, safely beside other writers:
both are JSON patches that test what they change, so a concurrent change of the list makes the
patch fail (422) instead of dropping another controller's finalizer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from corral.core.kube.client import as_dict


def has(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in (obj["metadata"].get("finalizers") or [])


async def add(
    client: AsyncClient, resource: Any, obj: Mapping[str, Any], finalizer: str
) -> dict[str, Any]:
    """`obj` with `finalizer` added (as read now); unchanged when it has it already."""
    meta = obj["metadata"]
    present = meta.get("finalizers")
    if present and finalizer in present:
        return dict(obj)
    if present:
        patch = [
            {"op": "test", "path": "/metadata/finalizers", "value": present},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]
    else:
        # No list to test: the resourceVersion makes the first finalizer atomic.
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]
    return as_dict(await client.patch(resource, meta["name"], patch,
                                      namespace=meta.get("namespace"),
                                      patch_type=PatchType.JSON))  # fmt: skip


async def remove(
    client: AsyncClient, resource: Any, obj: Mapping[str, Any], finalizer: str
) -> None:
    """Drop `finalizer` from the object; one that is gone, or without it, is fine."""
    meta = obj["metadata"]
    present = list(meta.get("finalizers") or [])
    if finalizer not in present:
        return
    patch = [
        {"op": "test", "path": "/metadata/finalizers", "value": present},
        {"op": "remove", "path": f"/metadata/finalizers/{present.index(finalizer)}"},
    ]
    try:
        await client.patch(resource, meta["name"], patch, namespace=meta.get("namespace"),
                           patch_type=PatchType.JSON)  # fmt: skip
    except ApiError as exc:
        if exc.status.code != 404:
            raise
