"""Running a command in a pod: the remote-command channels, the final Status, the errors a
refused exec becomes, and the whole call against a WebSocket server of our own that answers
as kube-apiserver does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from corral.core.clusters.credential import Credential
from corral.core.errors import Forbidden, Invalid, NotFound, Unavailable
from corral.core.kube.connections import Connection
from corral.core.kube.credential import client_for
from corral.core.kube.impersonation import Impersonation
from corral.core.kube.podexec import STATUS_LIMIT, Output, execute, exit_code, refusal_error

ALICE = Impersonation("u-alice", ("system:authenticated",))

SUCCESS = {"metadata": {}, "status": "Success"}


def failure(code: str) -> dict[str, Any]:
    return {
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": code}]},
    }


def frame(channel: int, data: bytes | dict[str, Any]) -> bytes:
    payload = json.dumps(data).encode() if isinstance(data, dict) else data
    return bytes([channel]) + payload


# -- the channels ---------------------------------------------------------------------------


def test_channels_are_split_into_stdout_stderr_and_status() -> None:
    output = Output(limit=100)
    for message in (
        frame(1, b""),  # the server opens each channel with an empty message
        frame(2, b""),
        frame(1, b"hello "),
        frame(2, b"warn\n"),
        frame(1, b"world\n"),
        b"",
        frame(0, b"stdin is never read back"),
        frame(4, b'{"Width":80}'),
        frame(3, failure("3")),
    ):
        output.add(message)
    result = output.result()
    assert (result.stdout, result.stderr, result.exit_code) == ("hello world\n", "warn\n", 3)
    assert not result.truncated


def test_each_stream_is_kept_up_to_the_limit_and_marked_truncated() -> None:
    output = Output(limit=5)
    for message in (frame(1, b"abc"), frame(1, b"defgh"), frame(1, b"ij"), frame(2, b"12345")):
        output.add(message)
    output.add(frame(3, SUCCESS))
    result = output.result()
    assert (result.stdout, result.stderr, result.exit_code) == ("abcde", "12345", 0)
    assert result.truncated
    exact = Output(limit=5)
    exact.add(frame(2, b"12345"))
    exact.add(frame(3, SUCCESS))
    assert not exact.result().truncated


def test_output_that_is_not_utf8_is_replaced_not_refused() -> None:
    output = Output(limit=3)
    output.add(frame(1, "é€".encode()))  # cut inside the euro sign
    output.add(frame(3, SUCCESS))
    assert output.result().stdout == "é\ufffd"


def test_a_status_split_over_messages_is_joined_and_an_oversized_one_refused() -> None:
    output = Output(limit=10)
    raw = json.dumps(failure("42")).encode()
    output.add(frame(3, raw[:10]))
    output.add(frame(3, raw[10:]))
    assert output.result().exit_code == 42
    huge = Output(limit=10)
    with pytest.raises(Unavailable):
        huge.add(frame(3, b" " * (STATUS_LIMIT + 1)))


def test_a_stream_without_a_readable_status_is_an_error() -> None:
    ended = Output(limit=10)
    ended.add(frame(1, b"partial"))
    with pytest.raises(Unavailable, match="ended before its exit status"):
        ended.result()
    garbled = Output(limit=10)
    garbled.add(frame(3, b"{not json"))
    with pytest.raises(Unavailable):
        garbled.result()


# -- the Status -----------------------------------------------------------------------------


def test_exit_codes_come_from_the_exit_code_cause() -> None:
    assert exit_code(SUCCESS) == 0
    assert exit_code(failure("1")) == 1
    assert exit_code(failure("255")) == 255


@pytest.mark.parametrize(
    "status",
    [
        # kwok without an exec configuration, through kube-apiserver's stream translator
        {"status": "Failure", "reason": "InternalError",
         "message": 'error executing command in container: no exec found for container "c"'},
        failure("-1"),
        failure("²"),
        failure("99999999999"),
        {"status": "Failure", "details": {"causes": "not a list"}},
        {"status": "Failure", "details": [1]},
    ],
)  # fmt: skip
def test_a_command_that_did_not_run_is_invalid_with_the_reason(status: dict[str, Any]) -> None:
    with pytest.raises(Invalid) as error:
        exit_code(status)
    assert error.value.code == "ExecFailed"
    assert error.value.message.startswith("the command could not run in the pod: ")
    if "message" in status:
        assert status["message"] in error.value.message


def test_a_status_that_is_no_object_is_unreadable() -> None:
    statuses: list[object] = [[], "Success", None, 0]
    for status in statuses:
        with pytest.raises(Unavailable):
            exit_code(status)


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (404, 'pods "web" not found', NotFound),
        (400, "container nope is not valid for pod web", NotFound),
        (403, 'pods "web" is forbidden: cannot create pods/exec', Forbidden),
        (400, "a container name must be specified for pod web, choose one of: [a b]", Invalid),
        (401, "Unauthorized", Unavailable),
        (500, "etcd is down", Unavailable),
        (503, "", Unavailable),
    ],
)
def test_a_refused_exec_becomes_the_matching_error(
    status: int, message: str, kind: type[Exception]
) -> None:
    body = {"kind": "Status", "status": "Failure", "message": message, "code": status}
    error = refusal_error(status, json.dumps(body).encode())
    assert type(error) is kind
    assert (message or f"HTTP {status}") in error.message


def test_a_refusal_that_is_not_a_status_keeps_its_text() -> None:
    error = refusal_error(400, b"Upgrade request required\n")
    assert isinstance(error, Invalid) and error.message.endswith("Upgrade request required")
    assert refusal_error(502, b"").message.endswith("HTTP 502")


# -- the whole call, against a server that answers as kube-apiserver does ---------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def cluster() -> AsyncIterator[Callable[[Handler], Awaitable[Connection]]]:
    servers: list[TestServer] = []
    connections: list[Connection] = []

    async def start(handler: Handler) -> Connection:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/exec", handler)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        credential = Credential(server=str(server.make_url("/")), token="corral-sa")
        connection = Connection(credential, client_for(credential))
        connections.append(connection)
        return connection

    yield start
    for connection in connections:
        await connection.close()
    for server in servers:
        await server.close()


def remote_command(
    protocols: tuple[str, ...], frames: list[bytes], seen: list[web.Request]
) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        socket = web.WebSocketResponse(protocols=protocols)
        await socket.prepare(request)
        for data in frames:
            await socket.send_bytes(data)
        await socket.close()
        return socket

    return handle


async def test_execute_sends_the_command_and_returns_what_it_wrote(
    cluster: Callable[[Handler], Awaitable[Connection]],
) -> None:
    seen: list[web.Request] = []
    frames = [frame(1, b"out\n"), frame(2, b"err\n"), frame(3, failure("7"))]
    connection = await cluster(remote_command(("v5.channel.k8s.io",), frames, seen))
    result = await execute(
        connection, "ns-a", "web", "app", ["sh", "-c", "echo out; exit 7"], timeout=5, limit=100,
        who=ALICE,
    )  # fmt: skip
    assert (result.stdout, result.stderr, result.exit_code, result.truncated) == (
        "out\n", "err\n", 7, False,
    )  # fmt: skip
    (request,) = seen
    assert request.match_info == {"ns": "ns-a", "pod": "web"}
    assert request.query.getall("command") == ["sh", "-c", "echo out; exit 7"]
    assert (request.query["stdout"], request.query["stderr"]) == ("true", "true")
    assert request.query["container"] == "app"
    assert "stdin" not in request.query and "tty" not in request.query
    assert request.headers["Authorization"] == "Bearer corral-sa"
    assert request.headers.getall("Impersonate-User") == ["u-alice"]
    assert request.headers.getall("Impersonate-Group") == ["system:authenticated"]
    offered = [p.strip() for p in request.headers["Sec-WebSocket-Protocol"].split(",")]
    assert offered == ["v5.channel.k8s.io", "v4.channel.k8s.io"]


async def test_execute_falls_back_to_v4_and_omits_an_unnamed_container(
    cluster: Callable[[Handler], Awaitable[Connection]],
) -> None:
    seen: list[web.Request] = []
    connection = await cluster(
        remote_command(("v4.channel.k8s.io",), [frame(1, b"x"), frame(3, SUCCESS)], seen)
    )
    result = await execute(connection, "ns", "web", None, ["true"], timeout=5, limit=100, who=ALICE)
    assert (result.stdout, result.exit_code) == ("x", 0)
    assert "container" not in seen[0].query


async def test_a_refused_handshake_keeps_the_clusters_reason(
    cluster: Callable[[Handler], Awaitable[Connection]],
) -> None:
    async def not_found(request: web.Request) -> web.StreamResponse:
        status = {"kind": "Status", "status": "Failure", "message": 'pods "web" not found'}
        return web.json_response(status, status=404)

    connection = await cluster(not_found)
    with pytest.raises(NotFound, match='pods "web" not found'):
        await execute(connection, "ns", "web", None, ["true"], timeout=5, limit=100, who=ALICE)


async def test_a_command_that_does_not_finish_is_stopped_at_the_timeout(
    cluster: Callable[[Handler], Awaitable[Connection]],
) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        socket = web.WebSocketResponse(protocols=("v5.channel.k8s.io",))
        await socket.prepare(request)
        while not socket.closed:
            await socket.send_bytes(frame(1, b"y\n" * 1000))
        return socket

    connection = await cluster(endless)
    with pytest.raises(Unavailable) as error:
        await execute(connection, "ns", "web", None, ["yes"], timeout=0.5, limit=10, who=ALICE)
    assert error.value.code == "Timeout"


async def test_an_unknown_protocol_or_a_bare_close_is_an_error(
    cluster: Callable[[Handler], Awaitable[Connection]],
) -> None:
    no_status = await cluster(remote_command(("v5.channel.k8s.io",), [frame(1, b"x")], []))
    with pytest.raises(Unavailable, match="ended before its exit status"):
        await execute(no_status, "ns", "web", None, ["true"], timeout=5, limit=100, who=ALICE)
    other = await cluster(remote_command(("channel.k8s.io",), [frame(3, SUCCESS)], []))
    with pytest.raises(Unavailable):
        await execute(other, "ns", "web", None, ["true"], timeout=5, limit=100, who=ALICE)


async def test_bad_arguments_are_refused_before_any_request(
    cluster: Callable[[Handler], Awaitable[Connection]],
) -> None:
    seen: list[web.Request] = []
    connection = await cluster(remote_command(("v5.channel.k8s.io",), [], seen))
    with pytest.raises(Invalid):
        await execute(connection, "ns", "web", None, [], timeout=5, limit=100, who=ALICE)
    with pytest.raises(NotFound):
        await execute(connection, "..", "web", None, ["true"], timeout=5, limit=100, who=ALICE)
    assert seen == []
