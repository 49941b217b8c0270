"""The one way to reach a downstream cluster: per cluster id, its credential, a typed client,
an HTTP session and the informers kept on it, made the first time they are needed and kept
while the cluster's credential stays the same.

Credentials are read one way: an informer over the credential Secrets in svc-system (those
labelled `LABEL_CLUSTER_CREDENTIAL`); `local` is this process's own connection to the
management cluster. When a credential changes (or the cluster's tunnel proxy does), the next use
gets a connection built on the new one at once, and the old one is retired: its informers stop,
and it closes once the requests already on it had `DRAIN_SECONDS`. When a credential goes,
whatever was built on it closes at once. "No credential" and "did not answer in time" are one
error, `Unavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
import httpx2
from lightkube import AsyncClient, operators
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.errors import Unavailable
from corral.core.kube.credential import client_for, from_environment, session_for, ssl_context
from corral.core.kube.impersonation import ImpersonatingTransport, Impersonation
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.tunnel_proxy import TunnelProxy

SYNC_TIMEOUT = 10.0
# Service account tokens rotate: this process's own credential is read again this often,
# rather than on every use.
LOCAL_REFRESH_SECONDS = 60.0

InformerFactory = Callable[[AsyncClient], Informer]
CredentialHook = Callable[[str], None]
# Typed clients kept per cluster for the users acting in it (they share one transport, so a
# client is only its headers and a parsed configuration): the most recent ones.
USER_CLIENTS = 256
# How long a replaced connection stays open for the requests already on it: the longest request
# corral itself bounds (a pod's exec action, at most 300 s; a typed request is cut at 15 s). Not
# "until none is in flight": callers keep a client across several requests, so a moment with
# none says nothing. A longer stream (a followed log, a watch, a terminal) is cut, as any closed
# connection cuts it, and its client reconnects over the new connection.
DRAIN_SECONDS = 300.0
# Replaced connections a cluster may keep draining at once: an agent whose tunnel comes and goes
# would otherwise hold one more session and pool per switch for DRAIN_SECONDS. The oldest
# beyond this close at once.
RETIRED_PER_CLUSTER = 2


@dataclass
class Connection:
    credential: Credential
    client: AsyncClient
    # The proxy to a tunnelled cluster (`core.kube.tunnel_proxy`); None to dial its server.
    # It holds a secret: never logged.
    proxy: str | None = field(default=None, repr=False)
    informers: dict[str, Informer] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # by informer
    _session: aiohttp.ClientSession | None = None
    _transport: httpx2.AsyncHTTPTransport | None = None
    _as: OrderedDict[Impersonation, AsyncClient] = field(default_factory=OrderedDict)
    closed: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    def client_as(self, who: Impersonation) -> AsyncClient:
        """A typed client whose every request impersonates `who`."""
        self._check_open()
        client = self._as.get(who)
        if client is not None:
            self._as.move_to_end(who)
            return client
        if self._transport is None:
            self._transport = httpx2.AsyncHTTPTransport(
                verify=ssl_context(self.credential), proxy=self.proxy
            )
        client = self._as[who] = client_for(
            self.credential, transport=ImpersonatingTransport(self._transport, who)
        )
        if len(self._as) > USER_CLIENTS:
            # Not closed: a request may still hold it, and it owns nothing but its headers
            # (the transport is shared and closed with the connection).
            self._as.popitem(last=False)
        return client

    def session(self) -> aiohttp.ClientSession:
        """The cluster's HTTP session: it reaches the cluster's server only and sends the
        credential per request, so sharing it across callers cannot carry it anywhere else."""
        self._check_open()
        if self._session is None or self._session.closed:
            self._session = session_for(self.credential, timeout=None, proxy=self.proxy)
        return self._session

    def _check_open(self) -> None:
        if self.closed.is_set():
            # Held past its close: nothing new is built on a credential replaced or gone.
            raise Unavailable("the cluster's connection was closed; ask for it again")

    def stop(self) -> None:
        """Stop the informers kept on it (a replacement builds its own); `close` awaits them."""
        for task in self.tasks.values():
            task.cancel()

    async def close(self) -> None:
        self.stop()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        await self.client.close()
        for client in self._as.values():
            await client.close()
        if self._transport is not None:
            await self._transport.aclose()
        if self._session is not None:
            await self._session.close()
        self.closed.set()


class Retired:
    """A replaced connection, left open for the requests already on it: it closes after
    `seconds`, or at once on `end` or `close` (its cluster's credential went, the process
    stops, or the cluster has replaced too many connections since)."""

    def __init__(self, cluster: str, connection: Connection, seconds: float) -> None:
        self.cluster = cluster
        self._now = asyncio.Event()
        self._closing = asyncio.create_task(self._close_after(connection, seconds))

    async def _close_after(self, connection: Connection, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._now.wait()
        await connection.close()

    def add_done_callback(self, callback: Callable[[Retired], None]) -> None:
        self._closing.add_done_callback(lambda _: callback(self))

    def end(self) -> None:
        """Close it now rather than after `seconds`, without waiting for the close."""
        # An event rather than a cancellation: a task cancelled before it first runs never
        # reaches its close.
        self._now.set()

    async def close(self) -> None:
        self.end()
        # Shielded: a caller cancelled meanwhile leaves it closing, not half closed.
        await asyncio.shield(self._closing)


class Connections:
    def __init__(
        self,
        kube: AsyncClient,
        tunnels: TunnelProxy,
        local: Callable[[], Credential] = from_environment,
        on_change: CredentialHook | None = None,
        drain_seconds: float = DRAIN_SECONDS,
    ) -> None:
        """`on_change(cluster)` runs when the cluster's credential Secret comes, changes or
        goes. A cluster reached through its agent is reached through `tunnels`, this
        process's proxy to every agent's tunnel, wherever it is held. A replaced connection
        closes `drain_seconds` after it was replaced."""
        self.credentials = Informer(
            kube,
            Secret,
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_CLUSTER_CREDENTIAL: operators.exists()},
            on_change=self._credential_changed,
        )
        self._read_local = local
        self._local: tuple[float, Credential] | None = None
        self._connections: dict[str, Connection] = {}
        self._retired: list[Retired] = []  # oldest first
        self._drain_seconds = drain_seconds
        self._changed = asyncio.Event()
        self._on_change = on_change
        self.tunnels = tunnels
        self.relays = tunnels.relays

    def credential(self, cluster: str) -> Credential | None:
        """The cluster's credential; None while it has none."""
        if cluster == names.LOCAL_CLUSTER:
            return self._local_credential()
        secret = self.credentials.get(
            f"{names.SYSTEM_NAMESPACE}/{names.credential_secret_name(cluster)}"
        )
        return Credential.from_secret_data(secret.get("data") or {}) if secret else None

    async def connection(self, cluster: str) -> Connection:
        credential = self.credential(cluster)
        if credential is None:
            raise Unavailable(f"cluster {cluster} has no credential yet")
        proxy = await self._proxy(cluster) if credential.tunnel else None
        known = self._connections.get(cluster)
        if known is not None and known.credential == credential and known.proxy == proxy:
            return known
        connection = Connection(credential, client_for(credential, proxy=proxy), proxy=proxy)
        self._connections[cluster] = connection
        if known is not None:
            self._retire(cluster, known)
        return connection

    async def client(self, cluster: str) -> AsyncClient:
        """A client for the cluster, with corral's credential: for what corral itself owns."""
        return (await self.connection(cluster)).client

    async def client_as(self, cluster: str, who: Impersonation) -> AsyncClient:
        """A client for the cluster that acts as `who`: for what a user asked."""
        return (await self.connection(cluster)).client_as(who)

    async def informer(
        self, cluster: str, name: str, factory: InformerFactory, *, wait: bool = True
    ) -> Informer:
        """The cluster's informer called `name`, made by `factory` and started the first time,
        and listed at least once; with `wait` False, perhaps not yet (its `synced` tells)."""
        connection = await self.connection(cluster)
        informer = connection.informers.get(name)
        if informer is None:
            informer = connection.informers[name] = factory(connection.client)
            connection.tasks[name] = asyncio.create_task(informer.run())
        if informer.synced.is_set() or not wait:
            # Most calls: a timeout armed and disarmed for nothing cost more than the rest.
            return informer
        try:
            # Not wait_for, which loses a cancellation that comes as the listing ends (Python
            # 3.11): the agent waiting here must stop when it is cancelled.
            async with asyncio.timeout(SYNC_TIMEOUT):
                await informer.synced.wait()
        except TimeoutError:
            raise Unavailable(f"cluster {cluster} did not answer in time") from None
        return informer

    def informers(self, cluster: str) -> list[str]:
        """The names of the cluster's informers on its current connection."""
        connection = self._connections.get(cluster)
        return list(connection.informers) if connection is not None else []

    async def drop_informer(self, cluster: str, name: str) -> None:
        """Stop the cluster's informer called `name` and forget it, when it has one."""
        connection = self._connections.get(cluster)
        if connection is None:
            return
        connection.informers.pop(name, None)
        task = connection.tasks.pop(name, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def forget(self, cluster: str) -> None:
        """Close at once what was built for the cluster, retired connections included: it is
        gone, or its credential is, and nothing may go on using that."""
        connection = self._connections.pop(cluster, None)
        if connection is not None:
            await connection.close()
        await self._close_retired(cluster)

    async def run(self) -> None:
        """Feed the credentials; once a cluster's credential changes, retire its connection,
        once it goes, close it, rather than at its next use. Runs until cancelled."""
        watch = asyncio.gather(self.credentials.run(), self.relays.leases.run())
        try:
            while True:
                await self._changed.wait()
                self._changed.clear()
                await self._follow_credentials()
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def close(self) -> None:
        for cluster in list(self._connections):
            await self.forget(cluster)
        for retired in list(self._retired):
            await retired.close()
        await self.tunnels.close()

    def _credential_changed(self, event: str, obj: Obj) -> None:
        self._changed.set()
        cluster = (obj["metadata"].get("labels") or {}).get(names.LABEL_CLUSTER_CREDENTIAL)
        if self._on_change is not None and cluster:
            self._on_change(cluster)

    async def _follow_credentials(self) -> None:
        # All decided and handed on before the first await: a use meanwhile may build a
        # cluster's next connection, which must stay, and a cancellation (the process
        # stopping) must find each connection where `close` looks.
        stale = [(c, known) for c, known in self._connections.items() if self._outdated(c, known)]
        gone = [cluster for cluster, _ in stale if self._usable_credential(cluster) is None]
        for cluster, known in stale:
            del self._connections[cluster]
            self._retire(cluster, known)
        for cluster in gone:
            await self._close_retired(cluster)

    async def _close_retired(self, cluster: str) -> None:
        for retired in [r for r in self._retired if r.cluster == cluster]:
            await retired.close()

    def _retire(self, cluster: str, connection: Connection) -> None:
        connection.stop()
        retired = Retired(cluster, connection, self._drain_seconds)
        self._retired.append(retired)
        retired.add_done_callback(self._retired.remove)
        for oldest in [r for r in self._retired if r.cluster == cluster][:-RETIRED_PER_CLUSTER]:
            oldest.end()

    def _outdated(self, cluster: str, connection: Connection) -> bool:
        if cluster == names.LOCAL_CLUSTER:
            return False  # not kept in a Secret: read again when used
        return self._usable_credential(cluster) != connection.credential

    def _usable_credential(self, cluster: str) -> Credential | None:
        try:
            return self.credential(cluster)
        except (KeyError, ValueError):  # a Secret that holds no usable credential
            return None

    async def _proxy(self, cluster: str) -> str:
        """The proxy to the cluster's tunnel; `Unavailable` while no process holds one."""
        proxy = await self.tunnels.proxy(cluster)
        if proxy is None:
            raise Unavailable(f"cluster {cluster}: its agent is not connected")
        return proxy

    def _local_credential(self) -> Credential:
        now = time.monotonic()
        if self._local is None or now - self._local[0] > LOCAL_REFRESH_SECONDS:
            self._local = (now, self._read_local())
        return self._local[1]
