"""`GET /v3/connect`: a cluster agent's tunnel, against the real management cluster
(docs/design/cluster-agent.md, docs/api.md "Cluster agents").

The agent here is corral's own (`corral.agent.dialer`), run in the test's process; the API
server it reaches as "its" cluster is this real kube-apiserver, with a real ServiceAccount
token of its own. So a request to `/k8s/clusters/<id>` that answers went through the tunnel:
the cluster has no other way in (its credential is the one the agent handed over, marked to go
through the tunnel), and the answer is the real kube-apiserver's.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import yaml
import yarl
from aiohttp.test_utils import TestClient, TestServer
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret

from corral.agent import dialer
from corral.apiserver.deps import DEPS
from corral.core.api import ids, names
from corral.core.clusters.credential import Credential
from corral.core.kube import agent_credentials, kinds, tunnel_leases
from corral.core.kube.client import as_dict
from corral.core.kube.credential import from_environment
from corral.core.kube.tunnels import CLOSE_GOING_AWAY
from corral.core.pki import CertificateAuthority
from corral.core.registration import tokens
from corral.core.tunnel import handshake, manifest
from corral.core.tunnel.session import MAX_MESSAGE

from .client import Api, eventually
from .conftest import EXTERNAL_URL, Person, Serving, make_app

AGENT_NAMESPACE = "svc-agent-contract"


@dataclass
class Registered:
    """A cluster registered through an agent: its id and its agent's credential value."""

    id: str
    value: str

    def authorization(self) -> str:
        return "Bearer " + handshake.credential(self.id, self.value)


@pytest.fixture(scope="module")
def service_account(core: k8s.CoreV1Api, kubeconfig: Any) -> str:
    """A ServiceAccount of "the downstream cluster" (this one) bound as the agent's is, and a
    token of it: what the agent hands corral."""
    rbac = k8s.RbacAuthorizationV1Api(core.api_client)
    try:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=AGENT_NAMESPACE)))
        core.create_namespaced_service_account(
            AGENT_NAMESPACE, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="corral-agent"))
        )
        rbac.create_cluster_role_binding(
            k8s.V1ClusterRoleBinding(
                metadata=k8s.V1ObjectMeta(name="corral-agent-contract"),
                role_ref=k8s.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"
                ),
                subjects=[
                    k8s.RbacV1Subject(
                        kind="ServiceAccount", name="corral-agent", namespace=AGENT_NAMESPACE
                    )
                ],
            )
        )
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    request = k8s.AuthenticationV1TokenRequest(
        spec=k8s.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    answer = core.create_namespaced_service_account_token("corral-agent", AGENT_NAMESPACE, request)
    return str(answer.status.token)


@pytest.fixture
def upstream(service_account: str) -> dialer.Upstream:
    own = from_environment()
    return dialer.Upstream.of(Credential(own.server, own.ca_cert, token=service_account))


async def register(kube: AsyncClient) -> Registered:
    """A cluster as `POST /v3/clusters` with only a name leaves it, with its agent credential."""
    cluster_id = "c-" + ids.random_suffix(5)
    spec = {"displayName": cluster_id, "driver": "imported"}
    body = as_dict(
        await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id), spec=spec))
    )
    value, _ = await agent_credentials.issue(kube, body)
    return Registered(cluster_id, value)


@pytest.fixture
async def cluster(kube: AsyncClient, client: TestClient[Any, Any]) -> Registered:
    registered = await register(kube)
    await eventually(f"the app to know {registered.id}'s agent credential",
                     lambda: _knows(client, registered))  # fmt: skip
    return registered


async def _knows(client: TestClient[Any, Any], registered: Registered) -> bool:
    """Whether the app takes the credential: a handshake without an upgrade answers 400 (the
    credential passed) rather than 401."""
    async with client.get(
        handshake.PATH, headers={"Authorization": registered.authorization(), **_agent_headers()}
    ) as answer:
        return answer.status == 400


def _agent_headers(params: handshake.Params | None = None) -> dict[str, str]:
    own = from_environment()
    params = params or handshake.Params(own.server, own.ca_cert or b"", "token")
    return {
        handshake.HEADER_PARAMS: params.header(),
        handshake.HEADER_VERSION: "0.1.0",
        handshake.HEADER_IMAGE: "localhost/corral:test",
    }


def _url(client: TestClient[Any, Any]) -> str:
    return str(client.make_url("")).rstrip("/")


def _dial(client: TestClient[Any, Any], registered: Registered) -> dialer.Dial:
    return dialer.Dial(url=_url(client), authorization=registered.authorization(),
                       version="0.1.0", image="localhost/corral:test", ssl=False)  # fmt: skip


@pytest.fixture
async def agent(
    client: TestClient[Any, Any], cluster: Registered, upstream: dialer.Upstream
) -> AsyncIterator[asyncio.Task[None]]:
    """The cluster's agent, holding its tunnel until the test ends."""
    task = asyncio.create_task(_dial(client, cluster).tunnel(upstream))
    yield task
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _through(api: Api, cluster: Registered) -> int:
    answer = await api.get(f"/k8s/clusters/{cluster.id}/api/v1/namespaces/{AGENT_NAMESPACE}")
    return answer.status


async def test_a_registered_cluster_is_reached_through_its_agent(
    client: TestClient[Any, Any], cluster: Registered, agent: asyncio.Task[None], admin: Person,
    core: k8s.CoreV1Api,
) -> None:  # fmt: skip
    await eventually("the proxy to answer through the tunnel",
                     lambda: _answers(admin.api, cluster))  # fmt: skip
    answer = await admin.api.get(f"/k8s/clusters/{cluster.id}/api/v1/namespaces/{AGENT_NAMESPACE}")
    assert answer.body["metadata"]["name"] == AGENT_NAMESPACE
    # The credential corral keeps for the cluster is the agent's, marked for the tunnel.
    secret = core.read_namespaced_secret(
        names.credential_secret_name(cluster.id), names.SYSTEM_NAMESPACE
    )
    stored = Credential.from_secret_data(secret.data)
    assert stored.tunnel
    assert stored.server == from_environment().server


async def _answers(api: Api, cluster: Registered) -> bool:
    return await _through(api, cluster) == 200


async def test_without_its_agent_a_registered_cluster_is_unavailable(
    client: TestClient[Any, Any], cluster: Registered, upstream: dialer.Upstream, admin: Person
) -> None:
    task = asyncio.create_task(_dial(client, cluster).tunnel(upstream))
    await eventually("the tunnel", lambda: _answers(admin.api, cluster))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    async def refused() -> bool:
        return await _through(admin.api, cluster) == 503

    await eventually("the cluster to be unavailable without its agent", refused)


@pytest.mark.parametrize(
    "forge",
    [
        "forged value",
        "other cluster's value",
        "replaced value",
        "no bearer",
        "malformed",
    ],
)
async def test_a_credential_that_is_not_this_clusters_opens_nothing(
    client: TestClient[Any, Any], kube: AsyncClient, cluster: Registered, forge: str,
    core: k8s.CoreV1Api, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    other = await register(kube)
    await eventually("the other credential", lambda: _knows(client, other))
    authorization = {
        "forged value": "Bearer " + handshake.credential(cluster.id, handshake.new_value()),
        "other cluster's value": "Bearer " + handshake.credential(cluster.id, other.value),
        "no bearer": "Basic " + base64.b64encode(f"{cluster.id}:{cluster.value}".encode()).decode(),
        "malformed": "Bearer " + cluster.value,
    }.get(forge)
    if forge == "replaced value":
        body = as_dict(await kube.get(kinds.Cluster, cluster.id))
        await agent_credentials.issue(kube, body)

        async def replaced() -> bool:
            return not await _knows(client, cluster)

        await eventually("the app to know the new credential", replaced)
        authorization = cluster.authorization()
    assert authorization is not None
    caplog.set_level(logging.INFO)
    async with client.get(
        handshake.PATH, headers={"Authorization": authorization, **_agent_headers()}
    ) as answer:
        assert answer.status == 401
        body = await answer.json()
    assert (body["status"], body["code"], body["message"]) == (
        401,
        "Unauthorized",
        "agent credential is not valid",
    )
    # Nothing was stored for the cluster, and the secret is in no log line.
    with pytest.raises(k8s.ApiException) as missing:
        core.read_namespaced_secret(
            names.credential_secret_name(cluster.id), names.SYSTEM_NAMESPACE
        )
    assert missing.value.status == 404
    assert cluster.value not in caplog.text and other.value not in caplog.text


@pytest.mark.parametrize(
    ("header", "value"),
    [
        (handshake.HEADER_PARAMS, "not base64"),
        (handshake.HEADER_PARAMS, base64.b64encode(b'{"server": "http://x"}').decode()),
        (handshake.HEADER_VERSION, "has spaces"),
    ],
)
async def test_bad_agent_parameters_are_refused_naming_the_header(
    client: TestClient[Any, Any], cluster: Registered, header: str, value: str,
    core: k8s.CoreV1Api,
) -> None:  # fmt: skip
    headers = {"Authorization": cluster.authorization(), **_agent_headers(), header: value}
    async with client.get(handshake.PATH, headers=headers) as answer:
        assert answer.status == 422
        body = await answer.json()
    assert (body["code"], body["fieldName"]) == ("InvalidFormat", header)
    with pytest.raises(k8s.ApiException):
        core.read_namespaced_secret(
            names.credential_secret_name(cluster.id), names.SYSTEM_NAMESPACE
        )


async def test_a_second_agent_replaces_the_first(
    client: TestClient[Any, Any], cluster: Registered, upstream: dialer.Upstream, admin: Person
) -> None:
    first = await _raw_tunnel(client, cluster)
    second = asyncio.create_task(_dial(client, cluster).tunnel(upstream))
    try:
        message = await asyncio.wait_for(_closed(first), 10)
        assert message == handshake.CLOSE_REPLACED
        await eventually("the second agent's tunnel", lambda: _answers(admin.api, cluster))
    finally:
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
        await first.close()


@pytest.mark.parametrize("revoke", ["reissued", "deleted"])
async def test_a_tunnel_whose_credential_is_revoked_is_closed_and_not_taken_again(
    client: TestClient[Any, Any], cluster: Registered, kube: AsyncClient, revoke: str
) -> None:
    tunnel = await _raw_tunnel(client, cluster)
    try:
        if revoke == "reissued":
            await agent_credentials.issue(kube, as_dict(await kube.get(kinds.Cluster, cluster.id)))
        else:
            await kube.delete(Secret, names.agent_credential_secret_name(cluster.id),
                              namespace=names.SYSTEM_NAMESPACE)  # fmt: skip
        # At the tunnel's next renewal, every tunnel_leases.RENEW_SECONDS.
        code = await asyncio.wait_for(_closed(tunnel), tunnel_leases.RENEW_SECONDS * 3)
        assert code == handshake.CLOSE_REVOKED
    finally:
        await tunnel.close()
    assert not await _knows(client, cluster)


@pytest.mark.parametrize(
    ("send", "code"),
    [
        ("oversized", aiohttp.WSCloseCode.MESSAGE_TOO_BIG),
        ("garbage", aiohttp.WSCloseCode.PROTOCOL_ERROR),
        ("text", aiohttp.WSCloseCode.PROTOCOL_ERROR),
    ],
)
async def test_a_tunnel_that_breaks_the_rules_is_closed_and_no_other_is_disturbed(
    client: TestClient[Any, Any], kube: AsyncClient, cluster: Registered,
    upstream: dialer.Upstream, admin: Person, send: str, code: int,
) -> None:  # fmt: skip
    bystander = await register(kube)
    await eventually("the bystander's credential", lambda: _knows(client, bystander))
    good = asyncio.create_task(_dial(client, bystander).tunnel(upstream))
    try:
        await eventually("the bystander's tunnel", lambda: _answers(admin.api, bystander))
        bad = await _raw_tunnel(client, cluster)
        if send == "oversized":
            await bad.send_bytes(b"\0" * (MAX_MESSAGE + 1))
        elif send == "garbage":
            await bad.send_bytes(b"GET / HTTP/1.1\r\n\r\n")
        else:
            await bad.send_str("hello")
        assert await asyncio.wait_for(_closed(bad), 10) == code
        await bad.close()
        assert await _through(admin.api, bystander) == 200
        assert not good.done()
    finally:
        good.cancel()
        await asyncio.gather(good, return_exceptions=True)


async def _raw_tunnel(
    client: TestClient[Any, Any], cluster: Registered
) -> aiohttp.ClientWebSocketResponse:
    """A tunnel's WebSocket with nothing speaking HTTP/2 in it: what the test sends is all."""
    headers = {"Authorization": cluster.authorization(), **_agent_headers()}
    return await client.session.ws_connect(
        _url(client) + handshake.PATH, headers=headers, max_msg_size=0
    )


async def _closed(socket: aiohttp.ClientWebSocketResponse) -> int | None:
    """Reads until the server closes; its close code."""
    while True:
        message = await socket.receive()
        if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
            return socket.close_code


@pytest.fixture
async def replica(
    kubeconfig: Any, admin_password: str, serving: Serving
) -> AsyncIterator[TestClient[Any, Any]]:
    """A second API server replica, as a second pod of the Deployment would be."""
    app = make_app(serving)
    async with TestClient(TestServer(app)) as served:

        async def ready() -> bool:
            async with served.get("/readyz") as answer:
                return answer.status == 200

        await eventually("the second replica's readiness", ready)
        yield served


async def test_a_replica_without_the_tunnel_reaches_the_cluster_through_its_holder(
    client: TestClient[Any, Any], replica: TestClient[Any, Any], cluster: Registered,
    agent: asyncio.Task[None], admin: Person, coordination: k8s.CoordinationV1Api,
) -> None:  # fmt: skip
    await eventually("the tunnel", lambda: _answers(admin.api, cluster))
    lease = coordination.read_namespaced_lease(
        names.tunnel_lease_name(cluster.id), names.SYSTEM_NAMESPACE
    )
    assert lease.metadata.annotations[names.ANNOTATION_AGENT_VERSION] == "0.1.0"
    assert lease.metadata.annotations[names.ANNOTATION_AGENT_IMAGE] == "localhost/corral:test"
    elsewhere = Api(replica, admin.api.token)
    await eventually("the second replica to reach the tunnel",
                     lambda: _answers(elsewhere, cluster), within=15)  # fmt: skip


async def test_an_agent_moving_to_another_replica_takes_its_tunnel_with_it(
    client: TestClient[Any, Any], replica: TestClient[Any, Any], cluster: Registered,
    upstream: dialer.Upstream, admin: Person, coordination: k8s.CoordinationV1Api,
) -> None:  # fmt: skip
    before = await _raw_tunnel(client, cluster)
    moved = asyncio.create_task(_dial(replica, cluster).tunnel(upstream))
    try:
        # The first replica finds its Lease taken at its next renewal and lets its tunnel go.
        code = await asyncio.wait_for(_closed(before), tunnel_leases.RENEW_SECONDS + 10)
        assert code == handshake.CLOSE_REPLACED
        await eventually("the first replica to reach the moved tunnel",
                         lambda: _answers(admin.api, cluster), within=15)  # fmt: skip
    finally:
        moved.cancel()
        await asyncio.gather(moved, return_exceptions=True)
        await before.close()
    # The Lease went with the last tunnel.
    await eventually("the Lease to go", lambda: _lease_gone(coordination, cluster))


def _connect_request(cluster: str, key: str) -> bytes:
    credentials = base64.b64encode(f"{cluster}:{key}".encode()).decode()
    return (f"CONNECT {cluster}:443 HTTP/1.1\r\nHost: {cluster}:443\r\n"
            f"Proxy-Authorization: Basic {credentials}\r\n\r\n").encode()  # fmt: skip


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bytes:
    """What comes back to `request` up to the end of the answer's head, or the connection's."""
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(10):
            return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as cut:
        return cut.partial
    except ConnectionError:
        return b""
    finally:
        writer.close()


async def test_the_relay_speaks_tls_only(
    client: TestClient[Any, Any], cluster: Registered, agent: asyncio.Task[None], admin: Person,
    coordination: k8s.CoordinationV1Api, serving: Serving,
) -> None:  # fmt: skip
    """The relay other processes reach a tunnel through takes the relay key over TLS with
    corral's serving certificate only: a plaintext CONNECT carrying the right key opens
    nothing."""
    await eventually("the tunnel", lambda: _answers(admin.api, cluster))
    lease = coordination.read_namespaced_lease(
        names.tunnel_lease_name(cluster.id), names.SYSTEM_NAMESPACE
    )
    host, _, port = lease.metadata.annotations[names.ANNOTATION_TUNNEL_RELAY].rpartition(":")
    request = _connect_request(cluster.id, await client.app[DEPS].tunnels.relays.key())

    plain = await _ask(*await asyncio.open_connection(host, int(port)), request)
    assert not plain.startswith(b"HTTP/1.1 200"), plain
    # The same request over TLS, checked as another replica checks the relay, is answered.
    secured = await _ask(*await asyncio.open_connection(
        host, int(port), ssl=serving.peer.context, server_hostname=serving.peer.name
    ), request)  # fmt: skip
    assert secured.startswith(b"HTTP/1.1 200"), secured


class _FakeRelay:
    """A TLS server standing where a Lease says a cluster's relay is: it keeps whatever a
    client sends it once TLS is up."""

    def __init__(self, ca: CertificateAuthority, name: str, directory: Any) -> None:
        cert, key = ca.issue_server("relay", [name]).write(directory, name)
        self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.tls.load_cert_chain(cert, key)
        self.received = b""
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._accepted, "127.0.0.1", 0, ssl=self.tls)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            self.received += await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.mark.parametrize("peer", ["another CA", "another name", "corral's"])
async def test_the_relay_key_goes_only_to_a_relay_whose_certificate_verifies(
    client: TestClient[Any, Any], kube: AsyncClient, serving: Serving, peer: str,
    tmp_path: Any,
) -> None:  # fmt: skip
    """A Lease names where a cluster's relay is; whoever listens there gets the relay key only
    once its certificate verifies as corral's (its CA, the external URL's host)."""
    ca = CertificateAuthority.create("someone else's CA") if peer == "another CA" else serving.ca
    name = "someone.else.test" if peer == "another name" else serving.peer.name
    fake = _FakeRelay(ca, name, tmp_path)
    address = await fake.start()
    cluster = "c-" + ids.random_suffix(5)
    now = datetime.datetime.now(datetime.UTC)
    await tunnel_leases.take(kube, cluster, "a-fake-holder", address, "0.1.0", "image", now)
    held = client.app[DEPS]
    try:
        url = await eventually("the Lease seen", lambda: held.connections.tunnels.proxy(cluster))
        proxy = yarl.URL(url)
        assert proxy.host is not None and proxy.port is not None and proxy.password is not None
        answer = await _ask(*await asyncio.open_connection(proxy.host, proxy.port),
                            _connect_request(cluster, proxy.password))  # fmt: skip
        assert answer.startswith(b"HTTP/1.1 502"), answer
        key = base64.b64encode(f"{cluster}:{await held.tunnels.relays.key()}".encode())
        if peer == "corral's":
            assert b"Proxy-Authorization: Basic " + key in fake.received
        else:
            assert fake.received == b""
    finally:
        assert fake.server is not None
        fake.server.close()
        await tunnel_leases.drop(kube, cluster, "a-fake-holder")


async def test_a_replica_stopping_ends_its_tunnels_at_once_and_the_agent_moves(
    replica: TestClient[Any, Any], client: TestClient[Any, Any], cluster: Registered,
    upstream: dialer.Upstream, admin: Person,
) -> None:  # fmt: skip
    # Through the other client's session: the replica's own goes when the replica stops.
    headers = {"Authorization": cluster.authorization(), **_agent_headers()}
    held = await client.session.ws_connect(_url(replica) + handshake.PATH, headers=headers)
    await eventually("the replica to hold the tunnel",
                     lambda: _holds(replica, cluster), within=15)  # fmt: skip
    closing = asyncio.create_task(_closed(held))
    # Well within aiohttp's shutdown timeout (60 s), which a held tunnel used to run out.
    await asyncio.wait_for(replica.server.close(), 10)
    assert await asyncio.wait_for(closing, 5) == CLOSE_GOING_AWAY
    # The agent dials again and reaches the replica left.
    moved = asyncio.create_task(_dial(client, cluster).tunnel(upstream))
    try:
        await eventually("the tunnel on the replica left", lambda: _answers(admin.api, cluster))
    finally:
        moved.cancel()
        await asyncio.gather(moved, return_exceptions=True)


async def _holds(replica: TestClient[Any, Any], cluster: Registered) -> bool:
    return replica.app is not None and replica.app[DEPS].tunnels.held(cluster.id) is not None


async def _lease_gone(coordination: k8s.CoordinationV1Api, cluster: Registered) -> bool:
    try:
        coordination.read_namespaced_lease(
            names.tunnel_lease_name(cluster.id), names.SYSTEM_NAMESPACE
        )
    except k8s.ApiException as exc:
        return exc.status == 404
    return False


@pytest.fixture(scope="module")
def coordination(core: k8s.CoreV1Api) -> k8s.CoordinationV1Api:
    return k8s.CoordinationV1Api(core.api_client)


async def _default_token(api: Api, cluster_id: str) -> dict[str, Any] | None:
    listed = await api.get(f"/v3/clusterregistrationtokens?clusterId={cluster_id}")
    tokens = [t for t in listed.body["data"] if t["name"] == "default-token" and t["token"]]
    return tokens[0] if tokens else None


async def _manifest(client: TestClient[Any, Any], url: str) -> tuple[int, str]:
    assert url.startswith(EXTERNAL_URL + "/v3/import/")
    async with client.get(url.removeprefix(EXTERNAL_URL)) as answer:
        return answer.status, await answer.text()


async def test_a_cluster_made_with_only_a_name_is_registered_by_applying_its_manifest(
    client: TestClient[Any, Any], admin: Person, upstream: dialer.Upstream,
) -> None:  # fmt: skip
    made = await admin.api.post("/v3/clusters", {"type": "cluster", "name": "registered"})
    assert made.status == 201, made.body
    cluster_id = made.body["id"]
    assert made.body["state"] == "pending"
    token = await eventually("the cluster's default token",
                             lambda: _default_token(admin.api, cluster_id))  # fmt: skip
    url = token["manifestUrl"]
    assert token["command"] == f"kubectl apply -f {url}"
    assert token["insecureCommand"] == f"curl --insecure -sfL {url} | kubectl apply -f -"
    assert token["nodeCommand"] == ""
    status, text = await _manifest(client, url)
    assert status == 200
    documents = list(yaml.safe_load_all(text))
    kinds_made = [(d["kind"], d["metadata"]["name"]) for d in documents]
    assert kinds_made == [
        ("Namespace", "svc-agent"), ("ServiceAccount", "corral-agent"),
        ("ClusterRoleBinding", "corral-agent"), ("Secret", "corral-agent-token"),
        ("Secret", "corral-agent-credential"), ("Deployment", "corral-agent"),
    ]  # fmt: skip
    value = documents[4]["stringData"]["credential"]
    env = {e["name"]: e.get("value") for e in
           documents[5]["spec"]["template"]["spec"]["containers"][0]["env"]}  # fmt: skip
    assert (env["CORRAL_URL"], env["CORRAL_CLUSTER"]) == (EXTERNAL_URL, cluster_id)
    # Fetched again, the manifest carries the same credential: a running agent is not cut off.
    assert (await _manifest(client, url))[1] == text
    # The credential in it opens the cluster's tunnel, and the cluster is reached through it.
    registered = Registered(cluster_id, value)
    task = asyncio.create_task(_dial(client, registered).tunnel(upstream))
    try:
        await eventually("the tunnel", lambda: _answers(admin.api, registered), within=15)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_manifest_needs_a_live_token_of_its_own_cluster(
    client: TestClient[Any, Any], admin: Person,
) -> None:  # fmt: skip
    ids_made = []
    for name in ("first", "second"):
        made = await admin.api.post("/v3/clusters", {"type": "cluster", "name": name})
        ids_made.append(made.body["id"])
    first, second = [
        await eventually("a default token", lambda c=c: _default_token(admin.api, c))
        for c in ids_made
    ]
    forged = tokens.new_value()
    for url in (
        manifest.url(EXTERNAL_URL, forged, ids_made[0]),
        manifest.url(EXTERNAL_URL, second["token"], ids_made[0]),  # another cluster's token
        EXTERNAL_URL + "/v3/import/" + first["token"] + ".yaml",
    ):
        assert (await _manifest(client, url))[0] == 404
    # Revoked, the token opens the manifest no more.
    assert (await admin.api.delete(f"/v3/clusterregistrationtokens/{first['id']}")).status in (
        200,
        204,
    )

    async def revoked() -> bool:
        return (await _manifest(client, first["manifestUrl"]))[0] == 404

    await eventually("the revoked token to open nothing", revoked)


# -- agent settings -----------------------------------------------------------------------------

SETTINGS = {
    "agentEnvVars": [{"name": "HTTPS_PROXY", "value": "http://proxy.example:3128"}],
    "clusterAgentDeploymentCustomization": {
        "appendTolerations": [{"key": "dedicated", "operator": "Equal", "value": "edge",
                               "effect": "NoSchedule"}],
        "overrideAffinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
        "overrideResourceRequirements": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                         "limits": {"memory": "128Mi"}},
    },
}  # fmt: skip
BAD_SETTINGS = [
    ({"agentEnvVars": [{"name": "CORRAL_URL", "value": "https://elsewhere"}]},
     "agentEnvVars[0].name"),
    ({"clusterAgentDeploymentCustomization": {"appendTolerations": [
        {"key": "k", "operator": "Exists", "value": "v"}]}},
     "clusterAgentDeploymentCustomization.appendTolerations[0].value"),
    ({"clusterAgentDeploymentCustomization": {"overrideResourceRequirements": {
        "requests": {"memory": "1Gi"}, "limits": {"memory": "1Mi"}}}},
     "clusterAgentDeploymentCustomization.overrideResourceRequirements.requests.memory"),
    ({"clusterAgentDeploymentCustomization": {"overrideAffinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}}}},
     "clusterAgentDeploymentCustomization.overrideAffinity.podAffinity."
     "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
    ({"clusterAgentDeploymentCustomization": {"overrideTolerations": []}},
     "clusterAgentDeploymentCustomization.overrideTolerations"),
]  # fmt: skip


async def _deployment(client: TestClient[Any, Any], api: Api, cluster_id: str) -> Any:
    token = await eventually("the default token", lambda: _default_token(api, cluster_id))
    status, text = await _manifest(client, token["manifestUrl"])
    assert status == 200, text
    return list(yaml.safe_load_all(text))[-1]


async def test_agent_settings_shape_the_manifests_deployment(
    client: TestClient[Any, Any], admin: Person
) -> None:
    made = await admin.api.post("/v3/clusters", {"type": "cluster", "name": "shaped", **SETTINGS})
    assert made.status == 201, made.body
    customization = SETTINGS["clusterAgentDeploymentCustomization"]
    pod = (await _deployment(client, admin.api, made.body["id"]))["spec"]["template"]["spec"]
    assert pod["tolerations"] == customization["appendTolerations"]
    assert pod["affinity"] == customization["overrideAffinity"]
    (container,) = pod["containers"]
    assert container["resources"] == customization["overrideResourceRequirements"]
    assert container["env"][-1] == SETTINGS["agentEnvVars"][0]
    # Changed, the manifest follows; cleared, nothing of them is left.
    changed = await admin.api.put(f"/v3/clusters/{made.body['id']}", {
        "agentEnvVars": [], "clusterAgentDeploymentCustomization": {}})  # fmt: skip
    assert changed.status == 200, changed.body
    pod = (await _deployment(client, admin.api, made.body["id"]))["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "affinity" not in pod
    assert "resources" not in pod["containers"][0]
    assert all(e["name"].startswith("CORRAL_") for e in pod["containers"][0]["env"])


@pytest.mark.parametrize(("body", "field"), BAD_SETTINGS)
async def test_bad_agent_settings_are_422_naming_the_field_and_nothing_is_stored(
    admin: Person, crs: k8s.CustomObjectsApi, body: dict[str, Any], field: str
) -> None:
    def clusters() -> set[str]:
        listed = crs.list_cluster_custom_object(names.GROUP, names.VERSION, "clusters")
        return {c["metadata"]["name"] for c in listed["items"]}

    before = clusters()
    refused = await admin.api.post("/v3/clusters", {"type": "cluster", "name": "bad", **body})
    assert (refused.status, refused.body.get("fieldName")) == (422, field), refused.body
    assert clusters() == before

    made = await admin.api.post("/v3/clusters", {"type": "cluster", "name": "kept", **SETTINGS})
    assert made.status == 201, made.body
    refused = await admin.api.put(f"/v3/clusters/{made.body['id']}", body)
    assert (refused.status, refused.body.get("fieldName")) == (422, field), refused.body
    stored = crs.get_cluster_custom_object(names.GROUP, names.VERSION, "clusters", made.body["id"])
    assert {k: stored["spec"].get(k) for k in SETTINGS} == SETTINGS
