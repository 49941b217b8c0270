"""The aiohttp application factory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace

from corral.apiserver.keys import KUBE, READINESS
from corral.apiserver.readiness import Readiness
from corral.apiserver.routes import health, root

log = logging.getLogger(__name__)

KUBE_GATE = "management-cluster"


def create_app(kube: AsyncClient) -> web.Application:
    app = web.Application()
    app[KUBE] = kube
    app[READINESS] = Readiness()
    app.add_routes(health.routes)
    app.add_routes(root.routes)
    app.cleanup_ctx.append(_reach_management_cluster)
    return app


async def _reach_management_cluster(app: web.Application) -> AsyncIterator[None]:
    """Open the readiness gate once the management cluster answers; retry until it does."""
    app[READINESS].gate(KUBE_GATE)

    async def probe() -> None:
        delay = 0.2
        while True:
            try:
                await app[KUBE].get(Namespace, "default")
            except Exception as exc:  # noqa: BLE001 - any failure means "not reachable yet"
                log.warning("management cluster not reachable yet: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            else:
                app[READINESS].open(KUBE_GATE)
                return

    task = asyncio.create_task(probe())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await app[KUBE].close()
