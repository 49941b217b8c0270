"""The tunnel's pure parts: HTTP/2 streams over an in-memory carrier, their flow control and
bounds, what either side refuses, the splice to a socket, and the agent's handshake."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.errors
import h2.events
import hyperframe.frame
import pytest
import yaml

from corral.core.api import names
from corral.core.errors import Invalid
from corral.core.tunnel import handshake, manifest
from corral.core.tunnel.session import (
    AUTHORITY,
    MAX_FRAME,
    MAX_MESSAGE,
    PREFACE,
    STREAM_WINDOW,
    FrameLengths,
    ProtocolViolation,
    Stream,
    StreamRefused,
    Tunnel,
    TunnelClosed,
)
from corral.core.tunnel.splice import splice

CERT = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


class Pipe:
    """One direction's messages; `None` is the close."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.sent: list[bytes] = []
        self.grew = asyncio.Event()


class End:
    """A carrier end: sends into one pipe, receives from the other."""

    def __init__(self, out: Pipe, into: Pipe) -> None:
        self.out, self.into = out, into

    async def send(self, data: bytes) -> None:
        self.out.sent.append(data)
        self.out.grew.set()
        await self.out.queue.put(data)

    async def receive(self) -> bytes | None:
        return await self.into.queue.get()

    def close(self) -> None:
        self.out.queue.put_nowait(None)


@dataclass
class Pair:
    corral: Tunnel
    agent: Tunnel
    corral_end: End
    agent_end: End
    agent_run: asyncio.Task[None]


def carriers() -> tuple[End, End]:
    up, down = Pipe(), Pipe()
    return End(up, down), End(down, up)


async def echo(stream: Stream) -> None:
    await stream.respond(200)
    while data := await stream.read():
        await stream.write(data)
    await stream.end()


@asynccontextmanager
async def tunnel_pair(accept=echo) -> AsyncIterator[Pair]:
    corral_end, agent_end = carriers()
    corral = Tunnel(corral_end, client=True)
    agent = Tunnel(agent_end, client=False, accept=accept)
    tasks = [asyncio.create_task(corral.run()), asyncio.create_task(agent.run())]
    try:
        yield Pair(corral, agent, corral_end, agent_end, tasks[1])
    finally:
        await corral.close()
        await agent.close()
        corral_end.close()
        agent_end.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def read_all(stream: Stream) -> bytes:
    data = bytearray()
    while chunk := await stream.read():
        data += chunk
    return bytes(data)


async def test_a_stream_carries_bytes_both_ways_and_the_half_close() -> None:
    async with tunnel_pair() as pair:
        corral = pair.corral
        stream = await corral.open()
        payload = os.urandom(3 * STREAM_WINDOW + 17)
        writer = asyncio.create_task(_write_then_end(stream, payload))
        assert await asyncio.wait_for(read_all(stream), 10) == payload
        await writer


async def _write_then_end(stream: Stream, payload: bytes) -> None:
    await stream.write(payload)
    await stream.end()


async def test_streams_are_independent_and_each_keeps_its_bytes() -> None:
    async with tunnel_pair() as pair:
        corral = pair.corral
        payloads = [os.urandom(100_000 + i) for i in range(8)]

        async def roundtrip(payload: bytes) -> bytes:
            stream = await corral.open()
            writer = asyncio.create_task(_write_then_end(stream, payload))
            data = await read_all(stream)
            await writer
            return data

        results = await asyncio.wait_for(asyncio.gather(*map(roundtrip, payloads)), 20)
        assert results == payloads


async def test_a_reader_that_stops_holds_back_only_its_own_sender() -> None:
    taken: asyncio.Queue[Stream] = asyncio.Queue()

    async def hold(stream: Stream) -> None:
        await stream.respond(200)
        await taken.put(stream)
        await asyncio.Event().wait()  # reads nothing until cancelled

    async with tunnel_pair(hold) as pair:
        corral = pair.corral
        stalled = await corral.open()
        await taken.get()
        writer = asyncio.create_task(stalled.write(os.urandom(STREAM_WINDOW + 1)))
        # The window is full and nothing is acknowledged: the writer waits with one byte left.
        await _until(pair.corral_end, lambda: corral._h2.local_flow_control_window(stalled.id) == 0)
        assert not writer.done()
        other = await corral.open()
        agent_side = await taken.get()
        await other.write(b"still moving")
        assert await asyncio.wait_for(agent_side.read(), 5) == b"still moving"
        assert not writer.done()
        writer.cancel()


async def test_bytes_are_acknowledged_as_the_reader_takes_them() -> None:
    taken: asyncio.Queue[Stream] = asyncio.Queue()

    async def hold(stream: Stream) -> None:
        await stream.respond(200)
        await taken.put(stream)
        await asyncio.Event().wait()

    async with tunnel_pair(hold) as pair:
        corral = pair.corral
        stream = await corral.open()
        agent_side = await taken.get()
        writer = asyncio.create_task(stream.write(os.urandom(2 * STREAM_WINDOW)))
        received = 0
        while received < 2 * STREAM_WINDOW:
            received += len(await asyncio.wait_for(agent_side.read(), 5))
        await asyncio.wait_for(writer, 5)


async def test_an_agent_that_cannot_connect_refuses_the_stream() -> None:
    async def unreachable(stream: Stream) -> None:
        await stream.respond(502)

    async with tunnel_pair(unreachable) as pair:
        corral = pair.corral
        with pytest.raises(StreamRefused, match="502"):
            await corral.open()
        # The tunnel is still good for the next stream.
        assert not corral.closed


async def test_the_agent_refuses_any_destination_but_its_api_server() -> None:
    async def served(stream: Stream) -> None:
        raise AssertionError("a stream to another authority was accepted")

    corral_end, agent_end = carriers()
    agent = Tunnel(agent_end, client=False, accept=served)
    task = asyncio.create_task(agent.run())
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.send_headers(1, [(":method", "CONNECT"), (":authority", "kubernetes.default:443")])
    assert AUTHORITY != "kubernetes.default:443"
    await corral_end.send(client.data_to_send())
    status = None
    while status is None:
        for event in client.receive_data(await asyncio.wait_for(corral_end.receive(), 5) or b""):
            if isinstance(event, h2.events.ResponseReceived):
                status = dict(event.headers)[b":status"]
    assert status == b"400"
    corral_end.close()
    await asyncio.wait_for(task, 5)


async def test_a_message_over_the_bound_ends_the_tunnel_with_goaway() -> None:
    async with tunnel_pair() as pair:
        await pair.corral_end.send(b"\0" * (MAX_MESSAGE + 1))
        with pytest.raises(ProtocolViolation) as violation:
            await asyncio.wait_for(pair.agent_run, 5)
        assert violation.value.code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR
        assert _goaway_code(pair.agent_end.out.sent) == h2.errors.ErrorCodes.FRAME_SIZE_ERROR


async def test_a_frame_over_the_bound_ends_the_tunnel() -> None:
    async with tunnel_pair() as pair:
        stream = await pair.corral.open()
        frame = hyperframe.frame.DataFrame(stream.id, data=b"x" * (20 * 1024))
        await pair.corral_end.send(frame.serialize())
        with pytest.raises(ProtocolViolation) as violation:
            await asyncio.wait_for(pair.agent_run, 5)
        assert violation.value.code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR
        assert _goaway_code(pair.agent_end.out.sent) == h2.errors.ErrorCodes.FRAME_SIZE_ERROR


@pytest.mark.parametrize("client", [True, False])
async def test_a_frame_announced_over_the_bound_ends_the_tunnel_at_its_header(
    client: bool,
) -> None:
    """Only the header arrives: nothing of the announced megabyte is waited for."""
    near, far = carriers()
    tunnel = Tunnel(near, client=client, accept=echo)
    task = asyncio.create_task(tunnel.run())
    header = (1024 * 1024).to_bytes(3, "big") + bytes([0, 0]) + (1).to_bytes(4, "big")
    await far.send((b"" if client else PREFACE) + header)
    with pytest.raises(ProtocolViolation) as violation:
        await asyncio.wait_for(task, 5)
    assert violation.value.code == h2.errors.ErrorCodes.FRAME_SIZE_ERROR
    assert _goaway_code(near.out.sent) == h2.errors.ErrorCodes.FRAME_SIZE_ERROR


def test_frame_lengths_are_followed_across_messages() -> None:
    lengths = FrameLengths(skip=0)
    frame = (100).to_bytes(3, "big") + b"\0" * 6 + b"x" * 100
    stream = frame * 3 + (MAX_FRAME + 1).to_bytes(3, "big") + b"\0" * 6
    # Cut anywhere, the three good frames pass and the fourth header is caught.
    for cut in (1, 5, 9, 50, 109, 110, 200):
        lengths = FrameLengths(skip=0)
        assert lengths.over_bound(stream[:cut]) is None
        assert lengths.over_bound(stream[cut:]) == MAX_FRAME + 1


async def test_garbage_instead_of_http2_ends_the_tunnel() -> None:
    corral_end, agent_end = carriers()
    agent = Tunnel(agent_end, client=False, accept=echo)
    task = asyncio.create_task(agent.run())
    await corral_end.send(b"GET / HTTP/1.1\r\nHost: corral\r\n\r\n")
    with pytest.raises(ProtocolViolation):
        await asyncio.wait_for(task, 5)
    assert _goaway_code(agent_end.out.sent) == h2.errors.ErrorCodes.PROTOCOL_ERROR


async def test_an_agent_cannot_open_a_stream_towards_corral() -> None:
    corral_end, agent_end = carriers()
    corral = Tunnel(corral_end, client=True)
    task = asyncio.create_task(corral.run())
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    await agent_end.send(server.data_to_send())
    headers = hyperframe.frame.HeadersFrame(2)
    headers.data = b"\x82"  # an indexed header, on a stream only corral may open
    headers.flags.add("END_HEADERS")
    await agent_end.send(headers.serialize())
    with pytest.raises(ProtocolViolation):
        await asyncio.wait_for(task, 5)


async def test_a_closed_tunnel_ends_every_stream_and_refuses_new_ones() -> None:
    async def hold(stream: Stream) -> None:
        await stream.respond(200)
        await asyncio.Event().wait()

    async with tunnel_pair(hold) as pair:
        stream = await pair.corral.open()
        reading = asyncio.create_task(stream.read())
        await pair.agent.close()
        with pytest.raises(TunnelClosed):
            await asyncio.wait_for(reading, 5)
        with pytest.raises(TunnelClosed):
            await pair.corral.open()


async def test_a_stream_spliced_to_a_socket_carries_it_both_ways() -> None:
    async def served(stream: Stream) -> None:
        near, far = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=near)
        far_reader, far_writer = await asyncio.open_connection(sock=far)

        async def server_side() -> None:
            # The "API server": answers what it got, upper-cased, then closes.
            data = await far_reader.read(1024)
            far_writer.write(data.upper())
            await far_writer.drain()
            far_writer.close()

        job = asyncio.create_task(server_side())
        await stream.respond(200)
        await splice(stream, reader, writer)
        await job

    async with tunnel_pair(served) as pair:
        corral = pair.corral
        stream = await corral.open()
        await stream.write(b"hello through the tunnel")
        assert await asyncio.wait_for(read_all(stream), 5) == b"HELLO THROUGH THE TUNNEL"
        await stream.end()


def _goaway_code(sent: list[bytes]) -> int | None:
    data = b"".join(sent)
    position = len(PREFACE) if data.startswith(PREFACE) else 0
    code = None
    while position + 9 <= len(data):
        frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(data[position:][:9]))
        frame.parse_body(memoryview(data[position + 9 : position + 9 + length]))
        if isinstance(frame, hyperframe.frame.GoAwayFrame):
            code = frame.error_code
        position += 9 + length
    return code


async def _until(end: End, condition: Callable[[], bool]) -> None:
    """Checked after each message this end sends: the window only changes when it sends."""
    async with asyncio.timeout(5):
        while not condition():
            end.out.grew.clear()
            await end.out.grew.wait()


# -- the handshake ----------------------------------------------------------------------------


def test_a_credential_is_read_back_as_its_cluster_and_value() -> None:
    value = handshake.new_value()
    header = "Bearer " + handshake.credential("c-abcde", value)
    assert handshake.presented(header) == ("c-abcde", value)
    assert handshake.matches(value, handshake.digest(value))
    assert not handshake.matches(handshake.new_value(), handshake.digest(value))


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Basic c-abcde:" + "b" * 48,
        "Bearer c-abcde:" + "b" * 47,
        "Bearer c-abcde:" + "a" * 48,  # "a" is not in the alphabet
        "Bearer local:" + "b" * 48,
        "Bearer c-ABC:" + "b" * 48,
        "Bearer " + "b" * 48,
        "Bearer token-abcde:" + "b" * 48,
    ],
)
def test_anything_not_shaped_as_a_credential_presents_nothing(header: str) -> None:
    assert handshake.presented(header) is None


def test_the_agent_parameters_round_trip_and_never_show_the_token() -> None:
    params = handshake.Params("https://10.0.0.1:6443", CERT.encode(), "secret-token")
    assert handshake.params(params.header()) == params
    assert "secret-token" not in repr(params)


def _header(document: object) -> str:
    return base64.b64encode(json.dumps(document).encode()).decode()


GOOD = {"server": "https://10.0.0.1", "caCert": CERT, "token": "t"}


@pytest.mark.parametrize(
    "header",
    [
        "not base64!",
        base64.b64encode(b"not json").decode(),
        _header(["a list"]),
        _header({**GOOD, "extra": 1}),
        _header({"server": GOOD["server"], "caCert": CERT}),
        _header({**GOOD, "server": "http://10.0.0.1"}),
        _header({**GOOD, "server": "https://10.0.0.1/some/path"}),
        _header({**GOOD, "server": "https://user:pw@10.0.0.1"}),
        _header({**GOOD, "caCert": "not a certificate"}),
        _header({**GOOD, "token": ""}),
        _header({**GOOD, "token": "two words"}),
        _header({**GOOD, "token": 5}),
        "A" * (handshake.PARAMS_LIMIT + 4),
    ],
)
def test_bad_agent_parameters_are_refused_naming_the_header(header: str) -> None:
    with pytest.raises(Invalid) as refused:
        handshake.params(header)
    assert refused.value.field == handshake.HEADER_PARAMS


def test_the_version_and_image_are_short_printable_text() -> None:
    assert handshake.text(handshake.HEADER_VERSION, "0.1.0") == "0.1.0"
    for bad in ("a b", "x" * 257, "line\nbreak"):
        with pytest.raises(Invalid):
            handshake.text(handshake.HEADER_VERSION, bad)


# -- the import manifest ----------------------------------------------------------------------


def _agent(checksum: str = "") -> manifest.Agent:
    return manifest.Agent(cluster="c-abcde", corral_url="https://corral.example",
                          credential=handshake.new_value(), image="localhost/corral:0.1.0",
                          ca_checksum=checksum)  # fmt: skip


def test_the_manifest_runs_the_agent_locked_down_with_its_own_credential() -> None:
    agent = _agent("f" * 64)
    documents = list(yaml.safe_load_all(manifest.render(agent)))
    assert agent.credential not in repr(agent)
    deployment = documents[-1]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["CORRAL_AGENT_CREDENTIAL"]["valueFrom"]["secretKeyRef"]["name"] == (
        manifest.CREDENTIAL_SECRET
    )
    assert env["CORRAL_CA_CHECKSUM"]["value"] == "f" * 64
    assert documents[4]["stringData"]["credential"] == agent.credential
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    # Without a CA of corral's own, nothing is pinned: the system's trust applies.
    assert "CORRAL_CA_CHECKSUM" not in manifest.render(_agent())


def test_the_manifests_objects_are_never_taken_for_the_project_syncs() -> None:
    """The sync removes the bindings carrying corral's managed-by label that it did not
    compute: the agent's cluster-admin binding must not be one of them."""
    for document in manifest.objects(_agent()):
        labels = document["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == manifest.NAME
        assert names.LABEL_MANAGED_BY not in labels, document["kind"]


def test_a_manifest_url_names_its_token_and_cluster() -> None:
    url = manifest.url("https://corral.example", "t" * 48, "c-abcde")
    assert url == f"https://corral.example/v3/import/{'t' * 48}_c-abcde.yaml"
    assert manifest.parse_name(url.rpartition("/")[2]) == ("t" * 48, "c-abcde")
    for bad in ("t_c-abcde.yml", "tc-abcde.yaml", "_c-abcde.yaml", "t_.yaml", "t_c-abcde"):
        assert manifest.parse_name(bad) is None
