"""What `GET /v3/subscribe` carries of a family: its changes as Rancher's events, each only to
a caller who may see the object.

A family of the management cluster's objects that can be subscribed to names the cache whose
changes are its objects and who sees one of them: the same rule its `find` applies, asked of
the object itself, so that it holds for an object already gone (a removal) as for one still
there. A family of a downstream cluster's objects (workloads, pods) names the caches and finds
the project a changed object is in, and so whether the caller has a role there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from aiohttp import web

from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.state.changes import Change
from corral.core.errors import Unavailable
from corral.core.kube.informer import Obj

EVENT_NAMES = {"ADDED": "resource.create", "MODIFIED": "resource.change",
               "DELETED": "resource.remove"}  # fmt: skip


T = TypeVar("T")


class Offered(Protocol):
    """What a subscription asks of each family it carries."""

    @property
    def resource_type(self) -> str: ...

    async def event(self, ask: Ask, change: Change) -> dict[str, Any] | None: ...


def _event(change: Change, resource_type: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"name": EVENT_NAMES[change.event], "resourceType": resource_type, "data": data}


@dataclass(frozen=True)
class Subscribable:
    family: Family[Obj]
    cache: str  # the name of the informer whose changes these are (`Stores`)
    sees: Callable[[Ask, Obj], bool]

    @property
    def resource_type(self) -> str:
        return self.family.schema.id

    async def event(self, ask: Ask, change: Change) -> dict[str, Any] | None:
        """The event of `change` for the caller of `ask`; None for an object they may not see."""
        if change.cache != self.cache or not self.sees(ask, change.obj):
            return None
        return _event(change, self.resource_type, self.family.render(ask, change.obj))


@dataclass(frozen=True)
class InProject(Generic[T]):
    """A family of a project's objects in a downstream cluster (`/v3/projects/{project}/…`)."""

    family: Family[T]
    caches: Collection[str]  # the names of the downstream informers whose changes these are
    # The object as the family shows it to the caller of `ask`, and its project's id; None
    # when they have no role in the project its namespace is in.
    found: Callable[[Ask, Change], Awaitable[tuple[str, T] | None]]

    @property
    def resource_type(self) -> str:
        return self.family.schema.id

    async def event(self, ask: Ask, change: Change) -> dict[str, Any] | None:
        if not change.cluster or change.cache not in self.caches:
            return None
        try:
            found = await self.found(ask, change)
        except Unavailable:
            return None  # the cluster did not answer for what judges it: a GET would be 503
        if found is None:
            return None
        pid, obj = found
        # Its links are those of its project's collection, as a GET there renders them.
        within = ask._replace(path={"project": pid})
        return _event(change, self.resource_type, self.family.render(within, obj))


# The families the application offers to subscribers, by resource type (`cluster`).
SUBSCRIBABLE = web.AppKey("subscribable", dict[str, Offered])
