"""The rate limit across replicas when its setting changes or a replica stops: applications
against one kube-apiserver, as API server workers or pods are, sharing each user's record
(`svc-system/ratelimit-<user>`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from corral.apiserver.auth.ledger import record_name
from corral.apiserver.auth.ratelimit import SETTING, WINDOW_SECONDS
from corral.core.api import names

from .client import Api, eventually
from .conftest import Person, Serving, make_app

# The tier's limit (conftest), under which each replica reserves a tenth at a time.
RAISED = 100_000
# Lower than the two replicas' reservations together.
LOWERED = 15_000


@contextlib.asynccontextmanager
async def replica(serving: Serving) -> AsyncIterator[TestClient[Any, Any]]:
    """Another replica of the application, with caches and a rate limiter of its own, served
    until the block ends (then it stops as a worker does on SIGTERM)."""
    app = make_app(serving)
    async with TestClient(TestServer(app)) as served:

        async def ready() -> bool:
            async with served.get("/readyz") as answer:
                return answer.status == 200

        await eventually("another replica's readiness", ready)
        yield served


@pytest.fixture(scope="module")
async def second(
    kubeconfig: Path, admin_password: str, serving: Serving
) -> AsyncIterator[TestClient[Any, Any]]:
    async with replica(serving) as served:
        yield served


async def a_minute_with_time_left() -> None:
    """The records count per minute of the wall clock: a test of one runs within one."""
    left = WINDOW_SECONDS - time.time() % WINDOW_SECONDS
    if left < 20:
        await asyncio.sleep(left)


@pytest.fixture
async def lowered(admin: Person) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    async def lower() -> None:
        changed = await admin.api.put(f"/v3/settings/{SETTING}", {"value": str(LOWERED)})
        assert changed.status == 200, changed.body

    yield lower
    restored = await admin.api.put(f"/v3/settings/{SETTING}", {"value": str(RAISED)})
    assert restored.status == 200, restored.body


async def taken(kube: AsyncClient, user_id: str) -> int:
    """How many of the window's requests the user's record holds taken."""
    record = await kube.get(ConfigMap, record_name(user_id), namespace=names.SYSTEM_NAMESPACE)
    return int((record.data or {})["used"])


async def test_a_lowered_limit_gets_back_what_every_replica_reserved_and_did_not_use(
    kube: AsyncClient,
    make_user: Callable[..., Awaitable[Person]],
    second: TestClient[Any, Any],
    lowered: Callable[[], Awaitable[None]],
) -> None:
    await a_minute_with_time_left()
    person = await make_user()  # its first requests go through the first replica
    on_second = Api(second, person.api.token)
    assert (await on_second.get(f"/v3/users/{person.id}")).status == 200
    # A handful of requests served; each replica holds a tenth of the limit reserved.
    assert await taken(kube, person.id) == 2 * RAISED // 10

    await lowered()  # through the first replica; the second learns it from its watch

    async def given_back() -> bool:
        return await taken(kube, person.id) < 20

    # Neither replica is asked anything by the user meanwhile: both give back on the change.
    await eventually("both replicas to give back their reservations", given_back)
    answer = await on_second.get(f"/v3/users/{person.id}")
    assert answer.status == 200, answer.body
    assert answer.headers["X-RateLimit-Limit"] == str(LOWERED)
    answer = await person.api.get(f"/v3/users/{person.id}")
    assert answer.status == 200, answer.body


async def test_a_replica_that_stops_gives_back_what_it_reserved_and_did_not_use(
    kube: AsyncClient,
    kubeconfig: Path,
    make_user: Callable[..., Awaitable[Person]],
    serving: Serving,
) -> None:
    await a_minute_with_time_left()
    person = await make_user()  # its first requests go through the first replica
    async with replica(serving) as stopping:
        on_stopping = Api(stopping, person.api.token)
        assert (await on_stopping.get(f"/v3/users/{person.id}")).status == 200
        assert await taken(kube, person.id) == 2 * RAISED // 10
    # Stopped as in a rolling upgrade: the one request it served stays counted, the rest of
    # its tenth is the first replica's to use.
    assert await taken(kube, person.id) == RAISED // 10 + 1
