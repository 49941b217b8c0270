"""What `GET /v3/subscribe` carries of a family: its changes as Rancher's events, each only to
a caller who may see the object.

A family that can be subscribed to names the cache whose changes are its objects and who sees
one of them: the same rule its `find` applies, asked of the object itself, so that it holds
for an object already gone (a removal) as for one still there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.state.changes import Change
from corral.core.kube.informer import Obj

EVENT_NAMES = {"ADDED": "resource.create", "MODIFIED": "resource.change",
               "DELETED": "resource.remove"}  # fmt: skip


@dataclass(frozen=True)
class Subscribable:
    family: Family[Obj]
    cache: str  # the name of the informer whose changes these are (`Stores`)
    sees: Callable[[Ask, Obj], bool]

    @property
    def resource_type(self) -> str:
        return self.family.schema.id

    def event(self, ask: Ask, change: Change) -> dict[str, Any] | None:
        """The event of `change` for the caller of `ask`; None for an object they may not see."""
        if change.cache != self.cache or not self.sees(ask, change.obj):
            return None
        return {
            "name": EVENT_NAMES[change.event],
            "resourceType": self.resource_type,
            "data": self.family.render(ask, change.obj),
        }


# The families the application offers to subscribers, by resource type (`cluster`).
SUBSCRIBABLE = web.AppKey("subscribable", dict[str, Subscribable])
