"""What a hosted control plane is made from that administrators set: the release of a version
in the catalog and the storage class (Settings), read fresh on each use so that a change
applies at the next pass."""

from __future__ import annotations

from lightkube import ApiError, AsyncClient

from corral.core.api import settings
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.provisioning import catalog


async def release(kube: AsyncClient, version: str) -> catalog.Release:
    """The catalog's release of `version`; Invalid listing the versions when it has none."""
    text = settings.document(
        settings.CATALOG_SETTING, await _setting(kube, settings.CATALOG_SETTING)
    )
    return catalog.parse(text).release(version)


async def storage_class(kube: AsyncClient) -> str:
    return settings.document(
        settings.STORAGE_CLASS_SETTING, await _setting(kube, settings.STORAGE_CLASS_SETTING)
    )


async def _setting(kube: AsyncClient, name: str) -> Obj | None:
    try:
        return as_dict(await kube.get(kinds.Setting, name))
    except ApiError as exc:
        if exc.status.code == 404:
            return None
        raise
