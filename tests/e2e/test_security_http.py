"""What the API server does with hostile or clumsy HTTP: oversized heads, bodies that arrive in
pieces, deep JSON, forged Host headers, caching and banners (issue 9)."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from urllib.parse import urlsplit

import yaml

from corral.devenv.environment import Environment

from .api import Api

# Between two writes, so that the server's first read ends where the first part does: the
# condition under test is a body that arrives in pieces, and only time apart makes pieces.
WRITE_GAP = 0.3


def raw_exchange(stack: Environment, context: ssl.SSLContext, *parts: bytes) -> bytes:
    """Send `parts` as separate TCP writes over TLS and read the whole answer (the server
    closes the connection: every request here says `Connection: close`)."""
    url = urlsplit(stack.api_url)
    assert url.hostname and url.port
    with (
        socket.create_connection((url.hostname, url.port), timeout=30) as plain,
        context.wrap_socket(plain, server_hostname=url.hostname) as tls,
    ):
        tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for index, part in enumerate(parts):
            if index:
                time.sleep(WRITE_GAP)
            tls.sendall(part)
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return answer


def split_answer(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(status_line.split()[1]), headers, body


def dechunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, body = out + rest[:size], rest[size + 2 :]
    return out


def login_request(stack: Environment, body: bytes, chunked: bool = False) -> list[bytes]:
    """The request's head and its body in two halves, each to be written on its own."""
    host = urlsplit(stack.api_url).netloc.encode()
    head = (
        b"POST /v3-public/localProviders/local?action=login HTTP/1.1\r\nHost: " + host + b"\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
    )
    half = len(body) // 2
    pieces = [body[:half], body[half:]]
    if not chunked:
        return [head + b"Content-Length: %d\r\n\r\n" % len(body), *pieces]
    return [
        head + b"Transfer-Encoding: chunked\r\n\r\n",
        *(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces),
        b"0\r\n\r\n",
    ]


def credentials(stack: Environment, **extra: object) -> bytes:
    body = {"username": "admin", "password": stack.admin_password, **extra}
    return json.dumps(body).encode()


def test_an_oversized_header_gets_the_json_error_and_is_neither_echoed_nor_logged(
    stack: Environment, corral_tls: ssl.SSLContext
) -> None:
    secret = "token-leak1:" + "s" * 9000
    host = urlsplit(stack.api_url).netloc.encode()
    request = (
        b"GET /v3/tokens HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n"
        b"Cookie: R_SESS=" + secret.encode() + b"\r\n\r\n"
    )
    status, headers, body = split_answer(raw_exchange(stack, corral_tls, request))
    assert status == 400
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)
    assert (error["type"], error["status"], error["code"]) == ("error", 400, "BadRequest")
    assert b"sssssss" not in body and b"token-leak1" not in body
    assert headers["server"] == "corral"
    log = (stack.root / "logs" / "apiserver.log").read_text()
    assert "malformed request" in log
    assert "token-leak1" not in log and "sssssss" not in log


def test_a_body_in_two_tcp_writes_is_read_whole(
    stack: Environment, corral_tls: ssl.SSLContext
) -> None:
    status, _, body = split_answer(
        raw_exchange(stack, corral_tls, *login_request(stack, credentials(stack)))
    )
    assert status == 201, body
    assert json.loads(body)["token"].startswith("token-")


def test_a_chunked_body_is_read_to_its_last_chunk(
    stack: Environment, corral_tls: ssl.SSLContext
) -> None:
    request = login_request(stack, credentials(stack), chunked=True)
    status, _, body = split_answer(raw_exchange(stack, corral_tls, *request))
    assert status == 201, body


def test_a_200_kb_body_under_the_limit_is_accepted(
    stack: Environment, corral_tls: ssl.SSLContext
) -> None:
    # Padded with whitespace JSON allows: a field the login does not have would be refused.
    large = credentials(stack)[:-1] + b" " * 200_000 + b"}"
    status, _, body = split_answer(raw_exchange(stack, corral_tls, *login_request(stack, large)))
    assert status == 201, body


def test_a_body_over_the_limit_is_refused(stack: Environment, corral_tls: ssl.SSLContext) -> None:
    huge = credentials(stack, padding="p" * (1024 * 1024 + 1))
    request = login_request(stack, huge, chunked=True)  # no Content-Length to refuse early
    status, _, body = split_answer(raw_exchange(stack, corral_tls, *request))
    assert status == 413
    assert json.loads(body)["code"] == "RequestEntityTooLarge"


def test_json_nested_1000_deep_is_a_400_even_before_authentication(api: Api) -> None:
    deep = "[" * 1000 + "]" * 1000
    raw = ('{"username": "admin", "password": "x", "nested": ' + deep + "}").encode()
    for caller, path in ((api.as_token(None), "/v3-public/localProviders/local?action=login"),
                         (api, "/v3/tokens")):  # fmt: skip
        answer = caller.post(path, raw=raw, headers={"Content-Type": "application/json"})
        assert answer.status == 400, answer.body
        assert answer.body["code"] == "InvalidBodyContent"


def test_non_utf8_body_is_a_400(api: Api) -> None:
    answer = api.post("/v3/tokens", raw=b'{"description": "\xff\xfe"}')
    assert answer.status == 400
    assert answer.body["code"] == "InvalidBodyContent"


def test_the_host_header_reaches_neither_links_nor_kubeconfigs(
    api: Api, stack: Environment
) -> None:
    forged = {"Host": "attacker.example.net"}
    listing = api.get("/v3/clusters", headers=forged)
    assert listing.status == 200
    assert listing.body["links"]["self"].startswith(stack.api_url)
    assert "attacker" not in json.dumps(listing.body)

    cluster = stack.cluster_ids[0]
    made = api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig", headers=forged)
    assert made.status == 200, made.body
    config = yaml.safe_load(base64.b64decode(made.body["config"]))
    servers = {c["cluster"]["server"] for c in config["clusters"]}
    assert servers == {f"{stack.api_url}/k8s/clusters/{cluster}"}


def test_token_issuing_answers_are_never_cached_and_name_no_versions(
    api: Api, stack: Environment
) -> None:
    login = api.login("admin", stack.admin_password)
    created = api.post("/v3/tokens", {"description": "cache check"})
    cluster = stack.cluster_ids[0]
    kubeconfig = api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig")
    refused = api.get("/v3/tokens/token-nothere")
    for answer in (login, created, kubeconfig, refused):
        assert answer.headers["Cache-Control"] == "no-store"
        assert answer.headers["Server"] == "corral"
    assert created.status == 201
    api.delete(f"/v3/tokens/{created.body['id']}")
