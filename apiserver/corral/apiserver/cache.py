"""Watch-fed in-memory copies of custom resources: every read is served from here.

A cache lists its resource, then watches from the list's resourceVersion; on any watch error
(including 410 Gone) it lists again and replaces its contents, so deletions missed while
disconnected are not kept. Writes made by this process are put into the cache at once, so a
client reads its own writes without waiting for the watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from lightkube import AsyncClient

from corral.core.kube import as_dict

log = logging.getLogger(__name__)

Obj = dict[str, Any]
IndexFn = Callable[[Obj], Iterable[str]]

RETRY_DELAY = 1.0
WATCH_TIMEOUT = 300


def name_of(obj: Obj) -> str:
    """The cache key: the name, prefixed with `<namespace>/` for namespaced objects."""
    meta = obj["metadata"]
    name: str = meta["name"]
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


class WatchCache:
    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        indexes: dict[str, IndexFn] | None = None,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._scope: dict[str, Any] = {"labels": labels}
        if namespace is not None:
            self._scope["namespace"] = namespace
        self._index_fns = indexes or {}
        self._objects: dict[str, Obj] = {}
        self._indexes: dict[str, dict[str, set[str]]] = {n: {} for n in self._index_fns}
        self.synced = asyncio.Event()
        self.name = resource._api_info.plural
        self.version = 0  # moves with every change: lets readers memoise what they derive

    # -- reads ----------------------------------------------------------------------------

    def get(self, name: str) -> Obj | None:
        return self._objects.get(name)

    def all(self) -> list[Obj]:
        return list(self._objects.values())

    def by_index(self, index: str, value: str) -> list[Obj]:
        names = self._indexes[index].get(value, set())
        return [self._objects[n] for n in names if n in self._objects]

    def __len__(self) -> int:
        return len(self._objects)

    # -- writes by this process -----------------------------------------------------------

    def put(self, obj: Obj) -> None:
        """Record an object this process just wrote, unless the watch already has a newer one."""
        current = self._objects.get(name_of(obj))
        if current is None or not _newer(current, obj):
            self._store(obj)

    def forget(self, name: str) -> None:
        self._remove(name)

    # -- feeding --------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            try:
                version = await self._relist()
                self.synced.set()
                async for event, obj in self._client.watch(
                    self._resource,
                    resource_version=version,
                    server_timeout=WATCH_TIMEOUT,
                    **self._scope,
                ):
                    data = as_dict(obj)
                    if event == "DELETED":
                        self._remove(name_of(data))
                    else:
                        self._store(data)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure means relist and rewatch
                log.warning("%s watch failed, listing again: %s", self.name, exc)
                await asyncio.sleep(RETRY_DELAY)

    async def _relist(self) -> str:
        listing = self._client.list(self._resource, **self._scope)
        fresh = {}
        async for obj in listing:
            data = as_dict(obj)
            fresh[name_of(data)] = data
        for name in set(self._objects) - set(fresh):
            self._remove(name)
        for obj in fresh.values():
            self._store(obj)
        return listing.resourceVersion

    def _store(self, obj: Obj) -> None:
        name = name_of(obj)
        self._remove(name)
        self.version += 1
        self._objects[name] = obj
        for index, fn in self._index_fns.items():
            for value in fn(obj):
                self._indexes[index].setdefault(value, set()).add(name)

    def _remove(self, name: str) -> None:
        old = self._objects.pop(name, None)
        if old is None:
            return
        self.version += 1
        for index, fn in self._index_fns.items():
            for value in fn(old):
                members = self._indexes[index].get(value)
                if members is not None:
                    members.discard(name)
                    if not members:
                        del self._indexes[index][value]


def _newer(current: Obj, candidate: Obj) -> bool:
    """Whether `current` is newer than `candidate`. resourceVersions are opaque to clients but
    are etcd revisions in practice; when either is not a number, the candidate wins."""
    a = current["metadata"].get("resourceVersion", "")
    b = candidate["metadata"].get("resourceVersion", "")
    return a.isdigit() and b.isdigit() and int(a) > int(b)
