"""Downstream namespaces and corral's ResourceQuotas, served from memory: watch-fed caches
per cluster, started the first time a request needs that cluster and kept while its
credential stays the same.

Project membership and quota usage are read from here for every namespace listing, usage
report and quota check, so those never cost a round trip to the downstream cluster; writes go
to the cluster and are put into the cache at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace, ResourceQuota

from corral.apiserver.cache import Obj, WatchCache
from corral.apiserver.errors import ApiError
from corral.apiserver.stores import Stores
from corral.core import resources
from corral.core.clusters.credential import Credential

SYNC_TIMEOUT = 10.0


def _project(obj: Obj) -> list[str]:
    value = (obj["metadata"].get("annotations") or {}).get(resources.ANNOTATION_PROJECT)
    return [value] if value else []


def _quota_project(obj: Obj) -> list[str]:
    value = (obj["metadata"].get("labels") or {}).get(resources.LABEL_PROJECT)
    return [value] if value else []


@dataclass
class _Entry:
    credential: Credential
    client: AsyncClient
    namespaces: WatchCache
    quotas: WatchCache
    tasks: list[asyncio.Task[None]]


class DownstreamCaches:
    def __init__(self, stores: Stores) -> None:
        self._stores = stores
        self._entries: dict[str, _Entry] = {}

    async def namespaces(self, cluster: str) -> WatchCache:
        """The cluster's namespaces (indexed by `project` id), listed at least once."""
        return await self._synced(cluster, (await self._entry(cluster)).namespaces)

    async def quotas(self, cluster: str) -> WatchCache:
        """The ResourceQuotas corral keeps in the cluster (indexed by `project` name)."""
        return await self._synced(cluster, (await self._entry(cluster)).quotas)

    async def _synced(self, cluster: str, cache: WatchCache) -> WatchCache:
        try:
            await asyncio.wait_for(cache.synced.wait(), SYNC_TIMEOUT)
        except TimeoutError:
            raise ApiError(
                503, "ClusterUnavailable", f"cluster {cluster} did not answer in time"
            ) from None
        return cache

    async def client(self, cluster: str) -> AsyncClient:
        """A client for writes to the cluster, with corral's credential."""
        return (await self._entry(cluster)).client

    async def _entry(self, cluster: str) -> _Entry:
        await self._forget_gone()
        credential = self._stores.credential(cluster)
        if credential is None:
            raise ApiError(503, "ClusterUnavailable", f"cluster {cluster} has no credential yet")
        entry = self._entries.get(cluster)
        if entry is not None and entry.credential != credential:
            await self._stop(cluster)
            entry = None
        if entry is None:
            client = credential.client()
            namespaces = WatchCache(client, Namespace, {"project": _project})
            managed = {resources.LABEL_MANAGED_BY: resources.MANAGED_BY}
            quotas = WatchCache(
                client, ResourceQuota, {"project": _quota_project}, namespace="*", labels=managed
            )
            tasks = [asyncio.create_task(c.run()) for c in (namespaces, quotas)]
            entry = _Entry(credential, client, namespaces, quotas, tasks)
            self._entries[cluster] = entry
        return entry

    async def _forget_gone(self) -> None:
        for cluster in [c for c in self._entries if self._stores.clusters.get(c) is None]:
            await self._stop(cluster)

    async def _stop(self, cluster: str) -> None:
        entry = self._entries.pop(cluster)
        for task in entry.tasks:
            task.cancel()
        await asyncio.gather(*entry.tasks, return_exceptions=True)
        await entry.client.close()

    async def close(self) -> None:
        for cluster in list(self._entries):
            await self._stop(cluster)
