"""Finding a /v3 route by its type (`http.urls.TypeIndex`): the same routes as aiohttp's own
walk would find, in any case of the type's name, with the same 404 and 405."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from corral.apiserver.http import urls


async def _answer(request: web.Request) -> web.Response:
    return web.Response()


def _app() -> web.Application:
    first, second = web.RouteTableDef(), web.RouteTableDef()
    first.get(urls.v3("tokens|token"))(_answer)
    first.get(urls.v3("tokens|token", "/{id}"))(_answer)
    first.delete(urls.v3("tokens|token", "/{id}"))(_answer)
    second.get(urls.v3("globalRoleBindings", "/{id}"))(_answer)
    second.get(urls.v3("projects", "/{project}/{kind:(?i:workloads)}"))(_answer)
    second.get("/healthz")(_answer)
    app = web.Application()
    urls.add_routes(app.router, [first, second])
    app.router.freeze()
    return app


async def _resolve(app: web.Application, method: str, path: str) -> web.UrlMappingMatchInfo:
    return await app.router.resolve(make_mocked_request(method, path, app=app))


@pytest.mark.parametrize(
    ("path", "canonical", "info"),
    [
        ("/v3/tokens", "/v3/{type}", {"type": "tokens"}),
        ("/v3/token/t-1", "/v3/{type}/{id}", {"type": "token", "id": "t-1"}),
        ("/v3/TOKENS/t-1", "/v3/{type}/{id}", {"type": "TOKENS", "id": "t-1"}),
        ("/v3/globalrolebindings/b", "/v3/{type}/{id}", {"type": "globalrolebindings", "id": "b"}),
        ("/v3/globalRoleBindings/b", "/v3/{type}/{id}", {"type": "globalRoleBindings", "id": "b"}),
        ("/v3/projects/c:p/Workloads", "/v3/{type}/{project}/{kind}",
         {"type": "projects", "project": "c:p", "kind": "Workloads"}),
        ("/healthz", "/healthz", {}),
    ],
)  # fmt: skip
async def test_a_route_is_found_by_its_type_in_any_case(
    path: str, canonical: str, info: dict[str, str]
) -> None:
    match = await _resolve(_app(), "GET", path)
    assert match.http_exception is None
    assert match.route.resource is not None
    assert match.route.resource.canonical == canonical
    assert dict(match) == info


async def test_a_method_a_path_does_not_serve_is_405_naming_those_it_does() -> None:
    match = await _resolve(_app(), "PUT", "/v3/tokens/t-1")
    assert isinstance(match.http_exception, web.HTTPMethodNotAllowed)
    assert match.http_exception.allowed_methods == {"GET", "HEAD", "DELETE"}


@pytest.mark.parametrize("path", ["/v3/nothing/x", "/v3/tokens/t-1/more", "/v3/token-s"])
async def test_a_path_of_no_route_is_404(path: str) -> None:
    match = await _resolve(_app(), "GET", path)
    assert isinstance(match.http_exception, web.HTTPNotFound)


def test_every_route_is_listed_once() -> None:
    routes = [(route.method, route.resource.canonical) for route in _app().router.routes()
              if route.resource is not None]  # fmt: skip
    assert sorted(routes) == sorted([
        *[(method, path) for method in ("GET", "HEAD") for path in (
            "/v3/{type}", "/v3/{type}/{id}", "/v3/{type}/{id}", "/v3/{type}/{project}/{kind}",
            "/healthz")],
        ("DELETE", "/v3/{type}/{id}"),
    ])  # fmt: skip


def test_a_typed_route_whose_variable_may_span_segments_is_refused() -> None:
    table = web.RouteTableDef()
    table.get(urls.v3("clusters", "/{id}/{rest:.*}"))(_answer)
    with pytest.raises(ValueError, match="may span segments"):
        urls.add_routes(web.Application().router, [table])
