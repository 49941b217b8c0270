"""The /v3 route patterns, and how a request finds its route among them in one lookup.

Every /v3 type is matched in any case (`globalRoleBindings` as well as `globalrolebindings`),
so its routes are patterns, and aiohttp's router keeps every pattern under `/v3` in one list
that it tries in turn: the last types registered took over a hundred microseconds to find,
more than the rest of a cached GET. `TypeIndex` holds those routes by their type's name in
lower case and their number of segments, and the router tries only the one or two a path can
match.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from aiohttp import hdrs, web
from aiohttp.web_urldispatcher import AbstractResource, AbstractRoute, DynamicResource

PREFIX = "/v3/"
# A pattern whose first segment after /v3/ is one of `v3`'s type alternatives.
_TYPED = re.compile(r"^/v3/\{\w+:\(\?i:([\w|]+)\)\}")
# A variable of a pattern: `{name}`, or `{name:<regex>}`.
_VARIABLE = re.compile(r"\{\w+(?::([^{}]*))?\}")
# The regexes a typed pattern's variables may have: none of them matches a `/`, so a pattern
# matches paths of exactly as many segments as it has.
_ONE_SEGMENT = re.compile(r"\(\?i:[\w|]+\)")


def v3(plural: str, rest: str = "") -> str:
    """A /v3 route whose type name matches in any case (`globalRoleBindings` as well)."""
    return f"/v3/{{type:(?i:{plural})}}{rest}"


def add_routes(router: web.UrlDispatcher, tables: Iterable[web.RouteTableDef]) -> None:
    """Add the routes of `tables` in order: those of a /v3 type to one `TypeIndex`, registered
    before them, the others as aiohttp adds them."""
    index = TypeIndex()
    router.register_resource(index)
    for table in tables:
        for route in table:
            if not isinstance(route, web.RouteDef):
                raise TypeError(f"only plain routes are indexed, not {route!r}")
            typed = _TYPED.match(route.path)
            if typed is None:
                route.register(router)
            else:
                index.add(typed[1].split("|"), route)


class TypeIndex(AbstractResource):
    """The /v3 routes of every type, found by the path's first segment and its length."""

    def __init__(self) -> None:
        super().__init__()
        self._by_type: dict[tuple[str, int], list[DynamicResource]] = {}
        self._by_path: dict[str, DynamicResource] = {}

    def add(self, types: list[str], route: web.RouteDef) -> None:
        """A route of `types`; routes of one path share a resource, as aiohttp's would, and
        each type keeps its routes in the order they came (the first that matches wins). A GET
        answers HEAD as well unless it says not to, as `add_get` does."""
        resource = self._by_path.get(route.path)
        if resource is None:
            for variable in _VARIABLE.finditer(route.path):
                if variable[1] is not None and not _ONE_SEGMENT.fullmatch(variable[1]):
                    raise ValueError(f"{route.path}: a variable that may span segments")
            resource = self._by_path[route.path] = DynamicResource(route.path)
            segments = route.path.count("/") - 1
            for name in types:
                self._by_type.setdefault((name.lower(), segments), []).append(resource)
        options = dict(route.kwargs)
        if route.method == hdrs.METH_GET and options.pop("allow_head", True):
            resource.add_route(hdrs.METH_HEAD, route.handler, **options)
        resource.add_route(route.method, route.handler, **options)

    async def resolve(self, request: web.Request) -> tuple[Any, set[str]]:
        path = request.rel_url.path_safe
        if not path.startswith(PREFIX):
            return None, set()
        segments = path.count("/") - 1
        name = path[len(PREFIX) :].partition("/")[0].lower()
        allowed: set[str] = set()
        for resource in self._by_type.get((name, segments), ()):
            match, methods = await resource.resolve(request)
            if match is not None:
                return match, methods
            allowed |= methods
        return None, allowed

    @property
    def canonical(self) -> str:
        return "/v3/{type}"

    def url_for(self, **kwargs: str) -> Any:
        raise NotImplementedError("a /v3 type's routes are not named")

    def add_prefix(self, prefix: str) -> None:
        raise NotImplementedError("the /v3 routes are never mounted under a prefix")

    def get_info(self) -> Any:  # aiohttp's own type for it is private
        return {"formatter": self.canonical}

    def raw_match(self, path: str) -> bool:
        return any(resource.raw_match(path) for resource in self._by_path.values())

    def __len__(self) -> int:
        return sum(len(resource) for resource in self._by_path.values())

    def __iter__(self) -> Iterator[AbstractRoute]:
        for resource in self._by_path.values():
            yield from resource
