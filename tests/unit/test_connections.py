"""The connection registry: a connection replaced by a new credential lets the requests already
on it finish (up to its drain bound) while new ones take the new one; a credential that goes
closes everything built on it at once. Each cluster here is a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.errors import Unavailable
from corral.core.kube.connections import RETIRED_PER_CLUSTER, Connections
from corral.core.kube.credential import client_for
from corral.core.kube.impersonation import Impersonation
from corral.core.kube.tunnel_leases import Relays
from corral.core.kube.tunnel_proxy import TunnelProxy

CLUSTER = "c-drain"
# The management cluster: never reached here (credentials are put, not listed or watched).
KUBE = Credential("http://127.0.0.1:9")
ALICE = Impersonation("u-alice", ("system:authenticated",))


@dataclass
class Server:
    """A cluster's API server that answers ConfigMap GETs with its own name; a GET of the
    ConfigMap `slow`, and a pod's log, hold until `release` is set."""

    name: str
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    credential: Credential = field(init=False)

    async def config_map(self, request: web.Request) -> web.Response:
        if request.match_info["name"] == "slow":
            self.arrived.set()
            await self.release.wait()
        meta = {"name": request.match_info["name"], "namespace": "default"}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {"served-by": self.name}}  # fmt: skip
        return web.json_response(body)

    async def log(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(f"{self.name} first\n".encode())
        self.arrived.set()
        await self.release.wait()
        await response.write(f"{self.name} last\n".encode())
        await response.write_eof()
        return response


@dataclass
class Cluster:
    connections: Connections
    servers: dict[str, Server]
    version: int = 0

    def switch(self, to: str) -> None:
        """The cluster's credential Secret now names server `to`, as the watch would put it."""
        self.version += 1
        self.connections.credentials.put(secret(self.servers[to].credential, str(self.version)))

    def gone(self) -> None:
        self.connections.credentials.forget(f"{names.SYSTEM_NAMESPACE}/{secret_name()}")


def secret_name() -> str:
    return names.credential_secret_name(CLUSTER)


def secret(credential: Credential, version: str) -> dict[str, object]:
    meta = {"name": secret_name(), "namespace": names.SYSTEM_NAMESPACE,
            "resourceVersion": version,
            "labels": {names.LABEL_CLUSTER_CREDENTIAL: CLUSTER}}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta,
            "data": credential.secret_data()}  # fmt: skip


@pytest.fixture
async def cluster() -> AsyncIterator[Callable[[float], Awaitable[Cluster]]]:
    """`start(drain_seconds)`: a cluster with two API servers, `old` and `new`, its credential
    naming `old`."""
    started: list[tuple[Connections, AsyncClient, list[TestServer], list[Server]]] = []

    async def start(drain_seconds: float) -> Cluster:
        servers, running = {}, []
        for name in ("old", "new"):
            server = servers[name] = Server(name)
            app = web.Application()
            app.router.add_get("/api/v1/namespaces/{ns}/configmaps/{name}", server.config_map)
            app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/log", server.log)
            test_server = TestServer(app, host="127.0.0.1")
            await test_server.start_server()
            running.append(test_server)
            server.credential = Credential(str(test_server.make_url("/")), token=f"{name}-token")
        kube = client_for(KUBE)
        connections = Connections(kube, TunnelProxy(Relays(kube), None),
                                  drain_seconds=drain_seconds)  # fmt: skip
        started.append((connections, kube, running, list(servers.values())))
        made = Cluster(connections, servers)
        made.switch("old")
        return made

    yield start
    for connections, kube, running, servers in started:
        for server in servers:
            server.release.set()
        await connections.close()
        await kube.close()
        for test_server in running:
            await test_server.close()


async def served_by(client: AsyncClient, name: str = "x") -> str:
    config_map = await client.get(ConfigMap, name, namespace="default")
    assert config_map.data is not None
    return str(config_map.data["served-by"])


Fetch = Callable[[Connections], Awaitable[AsyncClient]]
CLIENTS: dict[str, Fetch] = {
    "corral's own": lambda connections: connections.client(CLUSTER),
    "a user's": lambda connections: connections.client_as(CLUSTER, ALICE),
}


@pytest.mark.parametrize("fetch", CLIENTS.values(), ids=CLIENTS.keys())
async def test_a_request_in_flight_when_the_credential_changes_completes(
    cluster: Callable[[float], Awaitable[Cluster]], fetch: Fetch
) -> None:
    made = await cluster(3600)
    slow = asyncio.create_task(served_by(await fetch(made.connections), "slow"))
    await made.servers["old"].arrived.wait()

    made.switch("new")
    assert await served_by(await fetch(made.connections)) == "new"

    made.servers["old"].release.set()
    assert await slow == "old"


async def test_a_stream_in_flight_when_the_credential_changes_completes(
    cluster: Callable[[float], Awaitable[Cluster]],
) -> None:
    made = await cluster(3600)
    old = await made.connections.connection(CLUSTER)
    async with old.session().get("api/v1/namespaces/default/pods/p/log") as stream:
        assert await stream.content.readline() == b"old first\n"

        made.switch("new")
        new = await made.connections.connection(CLUSTER)
        assert new is not old
        assert await served_by(new.client) == "new"

        made.servers["old"].release.set()
        assert await stream.content.read() == b"old last\n"
    assert not old.closed.is_set()


async def test_a_replaced_connection_closes_at_the_bound_and_cuts_what_is_left(
    cluster: Callable[[float], Awaitable[Cluster]],
) -> None:
    made = await cluster(0)
    old = await made.connections.connection(CLUSTER)
    slow = asyncio.create_task(served_by(old.client, "slow"))
    await made.servers["old"].arrived.wait()

    made.switch("new")
    assert await served_by(await made.connections.client(CLUSTER)) == "new"
    await old.closed.wait()

    with pytest.raises(httpx2.HTTPError):
        await slow
    with pytest.raises(Unavailable):
        old.session()


async def test_a_credential_that_goes_closes_its_connections_at_once(
    cluster: Callable[[float], Awaitable[Cluster]],
) -> None:
    made = await cluster(3600)
    retired = await made.connections.connection(CLUSTER)
    slow = asyncio.create_task(served_by(retired.client, "slow"))
    await made.servers["old"].arrived.wait()
    made.switch("new")
    current = await made.connections.connection(CLUSTER)

    made.gone()
    await made.connections.forget(CLUSTER)

    assert retired.closed.is_set()
    assert current.closed.is_set()
    with pytest.raises(httpx2.HTTPError):
        await slow
    with pytest.raises(Unavailable):
        await made.connections.connection(CLUSTER)


async def test_closing_closes_retired_connections_too(
    cluster: Callable[[float], Awaitable[Cluster]],
) -> None:
    made = await cluster(3600)
    retired = await made.connections.connection(CLUSTER)
    retired.session()
    made.switch("new")
    current = await made.connections.connection(CLUSTER)

    await made.connections.close()

    assert retired.closed.is_set()
    assert current.closed.is_set()


async def test_a_cluster_that_keeps_switching_keeps_only_its_latest_replaced_connections(
    cluster: Callable[[float], Awaitable[Cluster]],
) -> None:
    """A tunnel that comes and goes cannot pile up connections for the drain's whole bound."""
    made = await cluster(3600)
    replaced = []
    for to in ["new", "old"] * RETIRED_PER_CLUSTER + ["new"]:
        replaced.append(await made.connections.connection(CLUSTER))
        made.switch(to)
    current = await made.connections.connection(CLUSTER)

    kept = replaced[-RETIRED_PER_CLUSTER:]
    for oldest in replaced[:-RETIRED_PER_CLUSTER]:
        await oldest.closed.wait()
    assert not any(connection.closed.is_set() for connection in [*kept, current])
    assert await served_by(current.client) == "new"
