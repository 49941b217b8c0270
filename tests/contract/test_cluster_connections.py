"""A cluster's credential changing or going under requests in flight, through `/k8s`: the app's
own connection registry, fed by the real kube-apiserver's watch of the credential Secrets. Each
"cluster" is an HTTP server of the test's on 127.0.0.1 that names itself in its answers, so
which credential served a request shows in the answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret

from corral.core.api import ids, names
from corral.core.clusters.credential import Credential
from corral.core.kube import cluster_secrets, kinds
from corral.core.kube.client import as_dict

from .client import Api, Response, eventually
from .conftest import FIELD_MANAGER, Person


@dataclass
class Upstream:
    """A cluster's API server: a GET of a ConfigMap answers with this server's name; one of
    the ConfigMap `slow` holds until `release` is set."""

    name: str
    credential: Credential | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def config_map(self, request: web.Request) -> web.Response:
        if request.match_info["name"] == "slow":
            self.arrived.set()
            await self.release.wait()
        return web.json_response({"kind": "ConfigMap", "data": {"served-by": self.name}})


@pytest.fixture
async def upstreams() -> AsyncIterator[dict[str, Upstream]]:
    made, servers = {}, []
    for name in ("old", "new"):
        upstream = made[name] = Upstream(name)
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/configmaps/{name}", upstream.config_map)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        upstream.credential = Credential(str(server.make_url("/")), token=f"{name}-token")
    yield made
    for upstream in made.values():
        upstream.release.set()
    for server in servers:
        await server.close()


@dataclass
class Imported:
    id: str
    body: dict[str, object]
    kube: AsyncClient

    async def reached_with(self, upstream: Upstream) -> None:
        """The cluster's credential Secret now names `upstream`."""
        assert upstream.credential is not None
        secret = cluster_secrets.credential_secret(self.body, upstream.credential)
        await self.kube.apply(secret, field_manager=FIELD_MANAGER, force=True)

    async def credential_gone(self) -> None:
        name = names.credential_secret_name(self.id)
        await self.kube.delete(Secret, name, namespace=names.SYSTEM_NAMESPACE)

    async def get(self, api: Api, config_map: str = "x") -> Response:
        return await api.get(
            f"/k8s/clusters/{self.id}/api/v1/namespaces/default/configmaps/{config_map}"
        )

    async def served_by(self, api: Api, upstream: Upstream) -> None:
        """Once the app reaches the cluster at `upstream`."""

        async def there() -> bool:
            answer = await self.get(api)
            return answer.status == 200 and answer.body["data"]["served-by"] == upstream.name

        await eventually(f"cluster {self.id} reached at {upstream.name}", there)


@pytest.fixture
async def imported(kube: AsyncClient, admin: Person) -> Imported:
    cluster_id = ids.generate("c")
    spec = {"displayName": "connections", "driver": "imported"}
    body = as_dict(await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id),
                                                   spec=spec)))  # fmt: skip
    return Imported(cluster_id, body, kube)


async def switched_while_slow(
    imported: Imported, upstreams: dict[str, Upstream], admin: Person
) -> asyncio.Task[Response]:
    """The cluster reached at `old`, a slow request in flight there, then the credential
    switched to `new` and a request served by it: the slow request, still held by `old`."""
    old, new = upstreams["old"], upstreams["new"]
    await imported.reached_with(old)
    await imported.served_by(admin.api, old)
    slow = asyncio.create_task(imported.get(admin.api, "slow"))
    await old.arrived.wait()
    await imported.reached_with(new)
    await imported.served_by(admin.api, new)
    return slow


async def test_a_request_in_flight_when_the_credential_changes_completes(
    imported: Imported, upstreams: dict[str, Upstream], admin: Person
) -> None:
    slow = await switched_while_slow(imported, upstreams, admin)

    upstreams["old"].release.set()
    answer = await slow
    assert answer.status == 200, answer.body
    assert answer.body["data"]["served-by"] == "old"


async def test_a_credential_that_goes_cuts_what_is_in_flight_on_a_replaced_one_too(
    imported: Imported, upstreams: dict[str, Upstream], admin: Person
) -> None:
    slow = await switched_while_slow(imported, upstreams, admin)

    await imported.credential_gone()

    # `old` never answers: the request ends only because its connection was closed.
    answer = await slow
    assert answer.status == 503, answer.body
    assert (await imported.get(admin.api)).status == 503
