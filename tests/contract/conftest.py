"""The contract tier: the real application factory, served in-process by aiohttp's test server,
against a real management cluster (etcd and kube-apiserver from tools/devkube, with corral's
CRDs). No operator runs: what the tests need of its work (its bootstrap, a driver's status,
users and their tokens) the fixtures write through the kube-apiserver, as the operator or an
earlier request would have, and tests check what lands there with the official `kubernetes`
client, independently of corral's own client code.
"""

from __future__ import annotations

import datetime
import secrets
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.app import create_app
from corral.core.api import ids, names
from corral.core.auth import hashing
from corral.core.drivers import schema as driver_schema
from corral.core.drivers import status as driver_status
from corral.core.features import parse as parse_features
from corral.core.kube import client as kube_client
from corral.core.kube import kinds, usernames
from corral.core.kube.client import as_dict
from corral.core.kube.status import StatusWriter
from corral.core.kube.tunnel_proxy import PeerTLS
from corral.core.pki import CertificateAuthority
from corral.devenv.environment import Environment, Options
from corral.operator.management import bootstrap

from .client import Api, eventually

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# Where clients reach the API: every link names it, whatever Host a request carries.
EXTERNAL_URL = "https://corral.contract.test"
FIELD_MANAGER = "corral-contract-tests"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.contract)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    """The management cluster alone: etcd and kube-apiserver, with corral's CRDs applied."""
    options = Options(root=tmp_path_factory.mktemp("contract"), devkube=devkube,
                      crds=ROOT / "crds", downstream_clusters=0, start_corral=False,
                      controllers=False)  # fmt: skip
    with Environment(options) as env:
        yield env


@pytest.fixture(scope="session")
def kubeconfig(plane: Environment) -> Iterator[Path]:
    """$KUBECONFIG names the management cluster, as for `corral-apiserver`: the app reaches the
    cluster `local` through it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KUBECONFIG", str(plane.management_kubeconfig))
        yield plane.management_kubeconfig


@pytest.fixture(scope="session")
async def kube(kubeconfig: Path) -> AsyncIterator[AsyncClient]:
    """corral's own client, for the writes the fixtures make in the operator's stead."""
    client = kube_client.async_client()
    yield client
    await client.close()


@pytest.fixture(scope="session")
def crs(kubeconfig: Path) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(kubeconfig)))


@pytest.fixture(scope="session")
def core(kubeconfig: Path) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s_config.new_client_from_config(str(kubeconfig)))


@pytest.fixture(scope="session")
async def admin_password(kube: AsyncClient) -> str:
    """What the operator does first on a new installation (its bootstrap: namespace,
    settings, the admin, the cluster `local`, the builtin driver), then what its driver
    reconciler says of the builtin driver: ready, with its schema."""
    password = secrets.token_urlsafe(18)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CORRAL_BOOTSTRAP_PASSWORD", password)
        await bootstrap.run(kube)
    driver = as_dict(await kube.get(kinds.NodeDriver, names.KWOK_DRIVER))
    writer = StatusWriter(kube, FIELD_MANAGER, lambda: datetime.datetime.now(datetime.UTC))
    observed = driver_status.Observed(builtin=True, active=True)
    await writer.apply(kinds.NodeDriver, names.KWOK_DRIVER, seen=driver,
                       conditions=driver_status.compute(observed),
                       fields={"schema": driver_schema.KWOK})  # fmt: skip
    # The suite makes hundreds of requests a minute as a few users.
    await kube.apply(
        kinds.Setting(metadata=ObjectMeta(name="api-rate-limit-per-minute"), value="100000"),
        field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip
    return password


@dataclass(frozen=True)
class Serving:
    """corral's serving certificate for EXTERNAL_URL's host, from a CA of the tests' own: the
    TLS its tunnel relay serves, and how another replica checks that relay."""

    ca: CertificateAuthority
    tls: ssl.SSLContext
    peer: PeerTLS


@pytest.fixture(scope="session")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Serving:
    ca = CertificateAuthority.create("contract-ca")
    cert, key = ca.issue_server("corral", ["corral.contract.test"]).write(
        tmp_path_factory.mktemp("serving"), "serving"
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    return Serving(ca, tls, PeerTLS.of(EXTERNAL_URL, ca.cert_pem))


def make_app(serving: Serving, **options: Any) -> web.Application:
    """The application as `corral-apiserver` builds it, at EXTERNAL_URL."""
    return create_app(kube_client.async_client(), parse_features(""), EXTERNAL_URL,
                      tls=serving.tls, peer=serving.peer, **options)  # fmt: skip


@pytest.fixture(scope="session")
async def client(
    kubeconfig: Path, admin_password: str, serving: Serving
) -> AsyncIterator[TestClient[Any, Any]]:
    """The application as `corral-apiserver` builds it, served once it is ready: every watch
    cache has listed."""
    app = make_app(serving)
    async with TestClient(TestServer(app)) as served:

        async def ready() -> bool:
            async with served.get("/readyz") as answer:
                return answer.status == 200

        await eventually("the API server's readiness", ready)
        yield served


@pytest.fixture(scope="session")
def anonymous(client: TestClient[Any, Any]) -> Api:
    return Api(client)


@dataclass(frozen=True)
class Person:
    id: str
    username: str
    api: Api


async def mint_token(kube: AsyncClient, user_id: str) -> str:
    """An API token of the user's, stored as the API server stores one: the key hashed, its
    digest in the key index. Returns `<name>:<key>`."""
    key, name = hashing.new_key(), ids.generate("token")
    labels = {names.LABEL_TOKEN_USER: user_id, names.INDEX_TOKEN_KEY: hashing.index_digest(key)}
    spec = {"token": hashing.hash_key(key), "ttlMillis": 0, "description": "contract tests",
            "userId": user_id, "authProvider": "local", "isDerived": True, "clusterName": "",
            "userPrincipal": {"name": f"local://{user_id}", "displayName": ""}}  # fmt: skip
    annotations = {names.ANNOTATION_TOKEN_HASHED: "true"}
    metadata = ObjectMeta(name=name, labels=labels, annotations=annotations)
    await kube.create(kinds.Token(metadata=metadata, spec=spec))
    return f"{name}:{key}"


async def signed_in(anonymous: Api, kube: AsyncClient, user_id: str, username: str) -> Person:
    """The user with a new token, once the app's caches know both and the user's bindings."""
    api = anonymous.as_token(await mint_token(kube, user_id))

    async def known() -> bool:
        bindings = await api.get("/v3/globalrolebindings")
        return bindings.status == 200 and bool(bindings.body["data"])

    await eventually(f"the app to know {user_id} and its token", known)
    return Person(user_id, username, api)


async def write_user(kube: AsyncClient, anonymous: Api, admin: bool = False) -> Person:
    """A user written as POST /v3/users writes one (the username's claim, the User, its
    global role), with no password: tests call as them with a token."""
    user_id, username = ids.generate("u"), f"contract-{secrets.token_hex(4)}"
    await usernames.claim(kube, username, user_id)
    spec = {"username": username, "displayName": username, "enabled": True}
    user = as_dict(await kube.create(kinds.User(metadata=ObjectMeta(name=user_id), spec=spec)))
    await usernames.own(kube, username, user_id, user["metadata"]["uid"])
    await kube.create(kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ids.generate("grb")),
        spec={"globalRoleName": "admin" if admin else "user", "userName": user_id},
    ))  # fmt: skip
    return await signed_in(anonymous, kube, user_id, username)


@pytest.fixture(scope="session")
async def admin(kube: AsyncClient, anonymous: Api) -> Person:
    """The bootstrapped administrator, with an API token."""
    return await signed_in(anonymous, kube, bootstrap.ADMIN_ID, bootstrap.ADMIN_USERNAME)


@pytest.fixture(scope="session")
async def user(kube: AsyncClient, anonymous: Api) -> Person:
    """A plain user, shared by the session: tests do not change it."""
    return await write_user(kube, anonymous)


@pytest.fixture
def make_user(kube: AsyncClient, anonymous: Api) -> Callable[..., Awaitable[Person]]:
    """A new user of the test's own (a plain one, or an administrator)."""

    async def make(admin: bool = False) -> Person:
        return await write_user(kube, anonymous, admin)

    return make


@pytest.fixture(scope="session")
async def cluster(kube: AsyncClient, admin: Person) -> str:
    """An imported cluster as the operator leaves one it cannot reach: the Cluster alone, no
    credential and no status. Projects and bindings need no more than it."""
    cluster_id = ids.generate("c")
    spec = {"displayName": "contract", "driver": "imported"}
    await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id), spec=spec))

    async def seen() -> bool:
        return (await admin.api.get(f"/v3/clusters/{cluster_id}")).status == 200

    await eventually(f"the app to see cluster {cluster_id}", seen)
    return cluster_id
