"""Authentication against hostile input: any bytes in the token headers end in the API's own
error body, and a token scoped to a cluster works only on that cluster's proxy routes.

The checks run the real middlewares in a real aiohttp server (raw bytes go over a socket, as
a client sends them), with stand-ins only for the caches behind them."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.authn import PROXY_PATH
from corral.apiserver.auth.ratelimit import RateLimiter
from corral.apiserver.auth.verified import VerifiedTokens
from corral.apiserver.middleware import api_middleware
from corral.core.auth import hashing
from corral.core.auth.tokens import AuthFailure, TokenRecord, split
from tests.unit.held import holding

from .test_rate_limit import MemoryLedger

KEY = hashing.new_key()
CREATED = "2026-01-01T00:00:00Z"
# Header bytes an HTTP parser lets through to the application: tab, space, visible ASCII and
# obs-text (0x80-0xff); control characters are refused by the parser before any code of ours.
HEADER_BYTES = st.binary(max_size=80).map(
    lambda data: bytes(b for b in data if b == 9 or 32 <= b <= 126 or b >= 128)
)


class Stores:
    """Just what authentication reads: every well-formed name is a token of user u-1 (its key
    is KEY), so each presented key reaches verification; `token-scoped` is scoped to c-abc;
    `token-oidc` comes from a sign-in through the oidc provider, which is disabled."""

    def token(self, name: str, key: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "creationTimestamp": CREATED, "labels": {}},
            "spec": {
                "userId": "u-1",
                "token": hashing.hash_key(KEY),
                "clusterName": "c-abc" if name == "token-scoped" else "",
                "authProvider": "oidc" if name == "token-oidc" else "local",
                "isDerived": True,
            },
        }

    def token_version(self, name: str) -> str | None:
        return None  # never stored: every request verifies its key

    def token_record(self, obj: dict[str, Any]) -> TokenRecord:
        return TokenRecord.from_object(obj)

    def user_active(self, user_id: str) -> bool:
        return True

    def number(self, name: str) -> float:
        return 0  # no idle timeout, no rate limit

    def is_admin(self, user_id: str) -> bool:
        return False

    def provider_enabled(self, provider: str) -> bool:
        return provider == "local"

    def groups(self, user_id: str) -> tuple[str, ...]:
        return ()

    def standing_stamp(self) -> object:
        return ()  # nothing above ever changes


async def ok(request: web.Request) -> web.Response:
    return web.json_response({"type": "ok"})


def application() -> web.Application:
    app = holding(
        web.Application(middlewares=[api_middleware]),
        stores=Stores(),
        activity=ActivityTracker(lambda token, seen: asyncio.sleep(0)),
        verified=VerifiedTokens(),
        limiter=RateLimiter(MemoryLedger()),
    )
    app.router.add_route("*", PROXY_PATH + "/{path:.*}", ok)
    app.router.add_route("*", PROXY_PATH, ok)
    app.router.add_route("*", "/v3/{path:.*}", ok)
    return app


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    """The application served on 127.0.0.1 from a thread of its own."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(application())
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    bound = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield bound
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def send(port: int, path: bytes, *headers: bytes) -> tuple[int, Any]:
    """One raw HTTP/1.1 request; the status and the JSON body of the answer."""
    head = b"GET " + path + b" HTTP/1.1\r\nHost: corral\r\nConnection: close\r\n"
    head += b"".join(h + b"\r\n" for h in headers) + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(head)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body)


def assert_api_error(status: int, body: Any) -> None:
    assert status in (401, 404, 410, 422), (status, body)
    assert body["type"] == "error" and body["status"] == status


# -- any bytes as a token ---------------------------------------------------------------------


@settings(max_examples=150, deadline=1000)
@given(
    scheme=st.sampled_from([b"Bearer ", b"Basic ", b"bearer  ", b""]),
    name=st.sampled_from([b"token-abcde", b"token-scoped", b"Bad_Name", b""]),
    key=HEADER_BYTES,
    as_cookie=st.booleans(),
)
def test_any_token_bytes_end_in_the_apis_own_error(
    port: int, scheme: bytes, name: bytes, key: bytes, as_cookie: bool
) -> None:
    value = name + b":" + key
    header = b"Cookie: R_SESS=" + value if as_cookie else b"Authorization: " + scheme + value
    assert_api_error(*send(port, b"/v3/tokens", header))


@settings(max_examples=100, deadline=1000)
@given(value=HEADER_BYTES)
def test_any_basic_credentials_end_in_the_apis_own_error(port: int, value: bytes) -> None:
    assert_api_error(*send(port, b"/v3/tokens", b"Authorization: Basic " + value))


@pytest.mark.parametrize("key", [b"\xff\xfe", b"abc\x80", b"\xc3(", b"\xed\xa0\x80", b"\xc3\xa9"])
@pytest.mark.parametrize(
    "form", [b"Authorization: Bearer token-abcde:", b"Cookie: R_SESS=token-abcde:"]
)
def test_keys_that_are_not_ascii_are_invalid_tokens(port: int, form: bytes, key: bytes) -> None:
    status, body = send(port, b"/v3/tokens", form + key)
    assert (status, body["code"], body["message"]) == (
        422,
        "InvalidToken",
        "invalid auth token value",
    )


def test_the_right_key_authenticates(port: int) -> None:
    status, _ = send(port, b"/v3/tokens", b"Authorization: Bearer token-abcde:" + KEY.encode())
    assert status == 200


@settings(max_examples=300, deadline=None)
@given(value=st.text(max_size=300))
def test_split_accepts_only_a_name_and_a_visible_ascii_key(value: str) -> None:
    try:
        name, key = split(value)
    except AuthFailure as failure:
        assert (failure.status, failure.message) == (422, "invalid auth token value")
        return
    assert f"{name}:{key}" == value
    assert key.isascii() and key.isprintable() and " " not in key and ":" not in key


# -- where a token scoped to a cluster is good ------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        (b"/k8s/clusters/c-abc", 200),
        (b"/k8s/clusters/c-abc/api/v1/namespaces", 200),
        (b"/k8s/clusters/c-abc//http://127.0.0.1:1/x", 200),  # the proxy keeps it on c-abc
        (b"/k8s/clusters/c-abcd/api", 401),
        (b"/k8s/clusters/local/api", 401),
        (b"/k8s/clusters/c-abc%2F..%2Flocal/api", 401),
        (b"/k8s/clusters/c-abc/../local/api", 200),  # still c-abc's proxy (which refuses ..)
        (b"/v3/clusters/c-abc", 401),
        (b"/v3/clusters/c-abc/nodes", 401),
        (b"/v3/cluster/c-abc", 401),
        (b"/v3/clusters/c-abc?action=generateKubeconfig", 401),
        (b"/v3/tokens", 401),
        (b"/k8s/c-abc", 401),
    ],
)
def test_a_scoped_token_is_good_only_on_its_clusters_proxy(
    port: int, path: bytes, status: int
) -> None:
    answer, body = send(port, path, b"Authorization: Bearer token-scoped:" + KEY.encode())
    assert answer == status, body
    if status == 401:
        assert body["message"] == "token is valid only for cluster c-abc"


def test_a_token_of_a_disabled_provider_authenticates_nowhere(port: int) -> None:
    answer, body = send(port, b"/v3/tokens", b"Authorization: Bearer token-oidc:" + KEY.encode())
    assert (answer, body["message"]) == (401, "must authenticate, provider disabled")


def test_an_unscoped_token_works_everywhere(port: int) -> None:
    for path in (b"/k8s/clusters/local/api", b"/v3/clusters/c-abc"):
        assert send(port, path, b"Authorization: Bearer token-abcde:" + KEY.encode())[0] == 200
