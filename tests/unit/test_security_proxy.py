"""Where corral sends a cluster's credential: only to that cluster's server, whatever path a
caller puts after `/k8s/clusters/{id}`, whatever URL or redirect a session is given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import unquote_to_bytes

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer, make_mocked_request
from hypothesis import given, settings
from hypothesis import strategies as st
from yarl import URL

from corral.apiserver.http.errors import ApiError
from corral.apiserver.routes.proxy import upstream_url
from corral.core.clusters.credential import Credential
from corral.core.kube.credential import ForeignOrigin, session_for

SERVERS = ["https://10.0.0.1:6443", "https://kube.example/k8s/clusters/c-x/", "http://h"]
SEGMENTS = st.lists(st.binary(max_size=12) | st.text(max_size=12), max_size=8)
# Characters a raw request path may hold, weighted towards those that build URLs.
RAW_PATH = st.text(alphabet="/:%.?#@abcxyz019AFf-_~+ ", max_size=60)


def decoded_parts(url: URL, server: str) -> list[bytes]:
    prefix = len(URL(server.rstrip("/")).raw_parts)
    return [unquote_to_bytes(p) for p in url.raw_parts[prefix:]]


@settings(max_examples=300, deadline=None)
@given(server=st.sampled_from(SERVERS), segments=SEGMENTS)
def test_each_segment_stays_one_segment_on_the_server(
    server: str, segments: list[bytes | str]
) -> None:
    credential = Credential(server=server)
    try:
        url = credential.url(*segments)
    except ValueError:
        assert any(s in (".", "..", b".", b"..") for s in segments)
        return
    assert credential.is_own(url)
    assert url.raw_path.startswith(URL(server).raw_path.rstrip("/"))
    given_parts = [s.encode() if isinstance(s, str) else s for s in segments]
    assert [p for p in decoded_parts(url, server) if p] == [p for p in given_parts if p]
    assert not url.query_string and not url.fragment


@settings(max_examples=300, deadline=None)
@given(server=st.sampled_from(SERVERS), rest=RAW_PATH)
def test_no_proxied_path_leaves_the_clusters_server(server: str, rest: str) -> None:
    try:
        request = make_mocked_request("GET", "/k8s/clusters/c-abc/" + rest)
    except ValueError:
        return  # not a path aiohttp would hand to a handler
    credential = Credential(server=server)
    try:
        url = upstream_url(request, credential)
    except ApiError as error:
        assert error.status == 400
        return
    assert credential.is_own(url)


@pytest.mark.parametrize(
    "rest", ["http://127.0.0.1:1/x", "/http://127.0.0.1:1/x", "http:%2F%2F127.0.0.1:1/x"]
)
def test_absolute_urls_in_the_path_are_path_segments(rest: str) -> None:
    request = make_mocked_request("GET", "/k8s/clusters/c-abc/" + rest)
    url = upstream_url(request, Credential(server="https://10.0.0.1:6443"))
    assert (url.host, url.port) == ("10.0.0.1", 6443)
    assert url.raw_path.startswith("/http:")


@pytest.mark.parametrize("rest", ["api/../../x", "%2E%2E/x", "api/%2e/x"])
def test_dot_segments_are_refused(rest: str) -> None:
    request = make_mocked_request("GET", "/k8s/clusters/c-abc/" + rest)
    with pytest.raises(ApiError) as refused:
        upstream_url(request, Credential(server="https://kube.example/prefix"))
    assert refused.value.status == 400


# -- the session: the credential per request, to the server only -----------------------------


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.path, request.headers.get("Authorization")))
        target = request.query.get("to")
        if target:
            raise web.HTTPFound(target)
        return web.json_response({"path": request.path})


async def serve(recorder: Recorder) -> TestServer:
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", recorder.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


@pytest.fixture
async def servers() -> AsyncIterator[tuple[Recorder, str, Recorder, str]]:
    own, foreign = Recorder(), Recorder()
    own_server, foreign_server = await serve(own), await serve(foreign)
    yield own, str(own_server.make_url("/")), foreign, str(foreign_server.make_url("/"))
    await own_server.close()
    await foreign_server.close()


async def test_the_token_goes_to_the_server_and_nowhere_else(
    servers: tuple[Recorder, str, Recorder, str],
) -> None:
    own, own_url, foreign, foreign_url = servers
    credential = Credential(server=own_url, token="secret")
    foreign_host = URL(foreign_url).raw_authority
    async with session_for(credential) as session:
        assert "Authorization" not in session.headers
        async with session.get("version") as response:
            assert response.status == 200
        async with session.get(credential.url("api", "v1")) as response:
            assert response.status == 200
        async with session.get("redirect", params={"to": "/moved"}) as response:
            assert response.status == 200
        for attempt in (
            foreign_url + "x",
            f"//{foreign_host}/x",
            f"redirect?to={foreign_url}x",
            f"redirect?to=//{foreign_host}/x",
        ):
            with pytest.raises(ForeignOrigin):
                await session.get(attempt)
    assert foreign.seen == []
    assert own.seen[:4] == [
        ("/version", "Bearer secret"),
        ("/api/v1", "Bearer secret"),
        ("/redirect", "Bearer secret"),
        ("/moved", "Bearer secret"),
    ]
    assert all(auth == "Bearer secret" for _, auth in own.seen)


async def test_a_session_without_a_token_sends_no_authorization(
    servers: tuple[Recorder, str, Recorder, str],
) -> None:
    own, own_url, _, _ = servers
    session = session_for(Credential(server=own_url))
    async with session, session.get("version") as response:
        assert response.status == 200
    assert own.seen == [("/version", None)]
