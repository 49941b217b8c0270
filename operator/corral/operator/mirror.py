"""A list-then-watch copy of one kind of object in a downstream cluster."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from lightkube import AsyncClient

from corral.core.kube.client import as_dict

log = logging.getLogger(__name__)

RETRY_INTERVAL = 5.0
WATCH_TIMEOUT = 300


class Mirror:
    """Keeps `objects` (by name) current through one watch; lists again after any failure so
    that deletions missed while disconnected are not kept. `on_change` runs after each event."""

    def __init__(
        self,
        client: AsyncClient,
        resource: Any,
        what: str,
        on_change: Callable[[], None],
    ) -> None:
        self.client = client
        self.resource = resource
        self.what = what
        self.on_change = on_change
        self.objects: dict[str, dict[str, Any]] = {}
        self.watching = False
        self.changes = 0  # moves with every listing and event: "has anything changed?"

    async def relist(self) -> None:
        listing = self.client.list(self.resource)
        self.objects = {o["metadata"]["name"]: o for o in [as_dict(x) async for x in listing]}
        self._version = listing.resourceVersion
        self.changes += 1

    async def run(self) -> None:
        while True:
            try:
                await self.relist()
                self.watching = True
                async for event, obj in self.client.watch(
                    self.resource, resource_version=self._version, server_timeout=WATCH_TIMEOUT
                ):
                    data = as_dict(obj)
                    if event == "DELETED":
                        self.objects.pop(data["metadata"]["name"], None)
                    else:
                        self.objects[data["metadata"]["name"]] = data
                    self.changes += 1
                    self.on_change()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - list again after any watch failure
                self.watching = False
                log.info("%s: watch ended: %s", self.what, exc)
                await asyncio.sleep(RETRY_INTERVAL)

    def put(self, obj: dict[str, Any]) -> None:
        """Record an object this process just wrote, before its watch event arrives."""
        self.objects[obj["metadata"]["name"]] = obj
        self.changes += 1
