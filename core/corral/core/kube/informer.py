"""A watch-fed in-memory copy of one kind of object: the one list-then-watch cache, for the
management cluster's objects and for a downstream cluster's alike.

An informer lists its resource, then watches from the list's resourceVersion; after any
failure (410 Gone included) it lists again and replaces its contents, so deletions missed
while away are not kept. Objects are kept by `name`, or `namespace/name` for namespaced ones,
and found through named indexes. Writes made by this process are put in at once (`put`,
`forget`), so it reads its own writes without waiting for the watch; the newer
resourceVersion wins, and a write or live read answered before a deletion the watch has
already brought does not bring the object back. `on_change(event, obj)` runs after each
change a listing or an event brings (`ADDED`, `MODIFIED`, `DELETED`), not after this
process's own `put` or `forget`. An informer that keeps a cut copy (`keep`) calls it only
when the copy changed: an update of fields it does not keep (a node's heartbeat, a pod's
container statuses) wakes no one.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

from lightkube import ApiError, AsyncClient

from corral.core.kube.client import as_dict

log = logging.getLogger(__name__)

Obj = dict[str, Any]
IndexFn = Callable[[Obj], Iterable[str]]
ChangeHook = Callable[[str, Obj], None]

RETRY_DELAY = 1.0
WATCH_TIMEOUT = 300
# Objects per page of a listing (client-go's default): a listing of many large objects never
# sits in memory whole, only a page of it before each object is cut to what is kept.
LIST_CHUNK = 500
# Deletions remembered, the most recent: enough for the writes in flight when they happened.
MAX_GONE = 4096


def key_of(obj: Obj) -> str:
    """The key: the name, prefixed with `<namespace>/` for namespaced objects."""
    meta = obj["metadata"]
    name: str = meta["name"]
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


class Informer:
    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        indexes: dict[str, IndexFn] | None = None,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
        *,
        fields: dict[str, Any] | None = None,
        name: str | None = None,
        on_change: ChangeHook | None = None,
        on_synced: Callable[[], None] | None = None,
        retry_delay: float = RETRY_DELAY,
        keep: Callable[[Obj], Obj] | None = None,
        share_strings: bool = False,
        versioned: Iterable[str] = (),
    ) -> None:
        """`keep(obj)` is what is kept of each object (all of it without): readers that need a
        few fields of large objects keep just those. `share_strings` keeps one copy of each
        key and short value across all objects (`shared`): for informers of many alike
        objects (a cluster's nodes) held for long, where it halves their memory. For each
        index named in `versioned`, `touched` tells when a value's objects last moved."""
        self._client = client
        self._resource = resource
        self._scope: dict[str, Any] = {"labels": labels}
        if fields is not None:
            self._scope["fields"] = fields
        if namespace is not None:
            self._scope["namespace"] = namespace
        self._index_fns = indexes or {}
        self._objects: dict[str, Obj] = {}
        # Key → the resourceVersion at which it was last seen gone. An own write answered
        # before that deletion (a DELETE's answer, a live read) can land after the watch brought
        # it; without this it would put back an object that no longer exists.
        self._gone: OrderedDict[str, str] = OrderedDict()
        self._indexes: dict[str, dict[str, set[str]]] = {n: {} for n in self._index_fns}
        # Index → value → the version at which an object of that value last came, changed or
        # went; a value goes with its last object, so this holds what the index holds.
        self._touched: dict[str, dict[str, int]] = {n: {} for n in versioned}
        self._on_change = on_change
        # Called after every listing: for a reader to whom an empty listing is news.
        self._on_synced = on_synced
        self._retry_delay = retry_delay
        self._keep = keep
        self._share_strings = share_strings
        self._resource_version: str | None = None
        self.name: str = name or resource._api_info.plural
        self.synced = asyncio.Event()  # set once the first listing is in
        self.watching = False  # whether a watch is open: the contents are current
        self.version = 0  # moves with every change: lets readers memoise what they derive
        # Moves when an object comes or goes, not when one changes: for readers that derive
        # from which objects there are (a project's workloads in id order), not their contents.
        self.members = 0
        self._next_version: asyncio.Future[None] | None = None  # what `changed` waits on

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def all(self) -> list[Obj]:
        return list(self._objects.values())

    def by_index(self, index: str, value: str) -> list[Obj]:
        keys = self._indexes[index].get(value, set())
        return [self._objects[k] for k in keys if k in self._objects]

    def __len__(self) -> int:
        return len(self._objects)

    def touched(self, index: str, value: str) -> int:
        """The version at which an object of `value` in `index` (one named in `versioned`)
        last came, changed or went; -1 while none has that value. Versions only grow, so a
        reader that derives from one value's objects (a user's tokens) keeps what it derived
        across changes to every other value's."""
        return self._touched[index].get(value, -1)

    async def changed(self, since: int) -> int:
        """The version once the contents have moved past version `since` (at once if they
        have): for a reader that follows what it derives, changes made meanwhile included."""
        while self.version == since:
            if self._next_version is None:
                self._next_version = asyncio.get_running_loop().create_future()
            # Shielded: one waiter cancelled leaves the others waiting.
            await asyncio.shield(self._next_version)
        return self.version

    async def read_through(self, key: str) -> Obj | None:
        """The object of `key`, read live when the cache does not hold it: one another client
        wrote a moment ago is found although its watch event is still on its way. What is
        read is kept as this process's own write would be (`put`). For an informer of a whole
        kind: a live read does not check the label scope."""
        found = self._objects.get(key)
        if found is not None:
            return found
        namespace, _, name = key.rpartition("/")
        try:
            obj = await self._client.get(self._resource, name, namespace=namespace or None)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
        self.put(as_dict(obj))
        return self._objects.get(key)

    # -- writes by this process -----------------------------------------------------------

    def put(self, obj: Obj) -> None:
        """Record an object this process just wrote, unless the watch already has a newer one."""
        obj = self._kept(obj)
        key = key_of(obj)
        current = self._objects.get(key)
        if current is not None:
            if not _newer(current, obj):
                self._store(obj)
        elif key not in self._gone or not _stale(_version_of(obj), self._gone[key]):
            self._store(obj)

    def forget(self, key: str) -> None:
        """Drop an object this process just deleted."""
        current = self._objects.get(key)
        if current is not None:
            self._went(key, _version_of(current))
        self._drop(key)

    # -- feeding --------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch; list again after any failure. Runs until cancelled."""
        while True:
            try:
                await self._list_and_watch()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure means relist and rewatch
                log.warning("%s: watch failed, listing again: %s", self.name, exc)
                await asyncio.sleep(self._retry_delay)

    async def _list_and_watch(self) -> None:
        await self.relist()
        self.synced.set()
        if self._on_synced is not None:
            self._on_synced()
        self.watching = True
        try:
            async for event, obj in self._client.watch(
                self._resource,
                resource_version=self._resource_version,
                server_timeout=WATCH_TIMEOUT,
                **self._scope,
            ):
                data = self._kept(as_dict(obj))
                if event == "DELETED":
                    self._went(key_of(data), _version_of(data))
                    self._drop(key_of(data))
                elif self._refresh(data):
                    continue
                else:
                    self._store(data)
                self._changed(event, data)
        finally:
            self.watching = False

    async def relist(self) -> None:
        """Replace the contents with a fresh listing; what is gone from it is dropped."""
        listing = self._client.list(self._resource, chunk_size=LIST_CHUNK, **self._scope)
        fresh = {key_of(data): data async for data in self._listed(listing)}
        self._resource_version = listing.resourceVersion
        for key in set(self._objects) - set(fresh):
            gone = self._objects[key]
            self._went(key, self._resource_version or "")
            self._drop(key)
            self._changed("DELETED", gone)
        for key, obj in fresh.items():
            old = self._objects.get(key)
            if old is not None and self._refresh(obj):
                continue
            self._store(obj)
            if old is None:
                self._changed("ADDED", obj)
            elif _version_of(old) != _version_of(obj):
                self._changed("MODIFIED", obj)

    async def _listed(self, listing: AsyncIterable[Any]) -> AsyncIterator[Obj]:
        async for obj in listing:
            yield self._kept(as_dict(obj))

    def _refresh(self, obj: Obj) -> bool:
        """Whether a cut copy is what is held already but for its resourceVersion: then only
        the version is taken, and nothing counts as changed."""
        current = self._objects.get(key_of(obj))
        if self._keep is None or current is None or not _same_but_version(current, obj):
            return False
        self._objects[key_of(obj)] = obj
        return True

    def _kept(self, obj: Obj) -> Obj:
        kept = obj if self._keep is None else self._keep(obj)
        return shared(kept) if self._share_strings else kept

    def _went(self, key: str, version: str) -> None:
        self._gone[key] = version
        self._gone.move_to_end(key)
        while len(self._gone) > MAX_GONE:
            self._gone.popitem(last=False)

    def _changed(self, event: str, obj: Obj) -> None:
        if self._on_change is not None:
            self._on_change(event, obj)

    def _move(self) -> None:
        self.version += 1
        if self._next_version is not None:
            self._next_version.set_result(None)
            self._next_version = None

    def _store(self, obj: Obj) -> None:
        key = key_of(obj)
        self._gone.pop(key, None)
        if not self._remove(key):
            self.members += 1
        self._move()
        self._objects[key] = obj
        for index, fn in self._index_fns.items():
            touched = self._touched.get(index)
            for value in fn(obj):
                self._indexes[index].setdefault(value, set()).add(key)
                if touched is not None:
                    touched[value] = self.version

    def _drop(self, key: str) -> None:
        if self._remove(key):
            self.members += 1

    def _remove(self, key: str) -> bool:
        """Whether there was an object of `key` to remove."""
        old = self._objects.pop(key, None)
        if old is None:
            return False
        self._move()
        for index, fn in self._index_fns.items():
            touched = self._touched.get(index)
            for value in fn(old):
                members = self._indexes[index].get(value)
                if members is not None:
                    members.discard(key)
                    if touched is not None:
                        touched[value] = self.version
                    if not members:
                        del self._indexes[index][value]
                        if touched is not None:
                            del touched[value]
        return True


# Longer values (a certificate, a message) are rarely the same in two objects.
SHARED_LENGTH = 64


def shared(value: Any) -> Any:
    """The same value with its keys and short strings interned: objects of one kind repeat
    the same keys, labels and condition values, which then exist once in the process."""
    if isinstance(value, dict):
        return {sys.intern(k) if isinstance(k, str) else k: shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared(v) for v in value]
    if isinstance(value, str) and len(value) <= SHARED_LENGTH:
        return sys.intern(value)
    return value


def _version_of(obj: Obj) -> str:
    version: str = obj["metadata"].get("resourceVersion", "")
    return version


def _same_but_version(a: Obj, b: Obj) -> bool:
    def unversioned(obj: Obj) -> Obj:
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": None}}

    return unversioned(a) == unversioned(b)


def _newer(current: Obj, candidate: Obj) -> bool:
    """Whether `current` is newer than `candidate`. resourceVersions are opaque to clients but
    are etcd revisions in practice; when either is not a number, the candidate wins."""
    a, b = _version_of(current), _version_of(candidate)
    return a.isdigit() and b.isdigit() and int(a) > int(b)


def _stale(candidate: str, gone: str) -> bool:
    """Whether an object at resourceVersion `candidate` is from before a deletion seen at
    `gone`; when either is not a number, the candidate wins."""
    return candidate.isdigit() and gone.isdigit() and int(candidate) <= int(gone)
