"""Cluster registration tokens and machines registering with them, against the real
management cluster (docs/api.md, "Cluster registration tokens" and "Machines joining").

The provisioned cluster here is what the operator leaves once a k3s cluster is provisioned:
its Cluster with the provisioner's status, and corral's credential for it. That credential
names this same real kube-apiserver, so the join credential a registration issues is a real
one, checked by using it: it may ask for its kubelet's certificate and nothing more.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import io
import json
import shlex
import socket
import ssl
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp.test_utils import TestServer
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.app import create_app
from corral.core import settings
from corral.core.api import ids, names
from corral.core.features import parse as parse_features
from corral.core.kube import client as kube_client
from corral.core.kube import kinds, registration_tokens
from corral.core.kube.client import as_dict
from corral.core.kube.credential import from_environment
from corral.core.pki import CertificateAuthority
from corral.core.provisioning import catalog
from corral.core.registration import tokens

from .client import Api, Response, error, eventually
from .clusters import provisioned
from .conftest import FIELD_MANAGER, ROOT, Person, write_user

PATH = "/v3/clusterregistrationtokens"
REGISTER = "/v3/connect/register"
VERSION = catalog.UPSTREAM_VERSION
OLD_VERSION = "v1.35.9"  # in the catalog, without real machines
NODE = {
    "kubelet": {"url": "/assets/kubelet", "sha256": "a" * 64},
    "kube-proxy": {"url": "/assets/kube-proxy", "sha256": "b" * 64},
    "cni-plugins": {"url": "https://downloads.example/cni-plugins.tgz", "sha256": "c" * 64},
}


@pytest.fixture(scope="module")
async def node_catalog(kube: AsyncClient) -> AsyncIterator[None]:
    """The catalog with real machines for VERSION and a version without; as it was after."""
    document = json.loads(settings.CATALOG[catalog.SETTING].default)
    document[OLD_VERSION] = dict(document[VERSION])
    document[VERSION] = {**document[VERSION], catalog.NODE: NODE}
    before = as_dict(await kube.get(kinds.Setting, catalog.SETTING)).get("value", "")
    setting = kinds.Setting(metadata=ObjectMeta(name=catalog.SETTING), value=json.dumps(document))
    await kube.apply(setting, field_manager=FIELD_MANAGER, force=True)
    yield
    setting = kinds.Setting(metadata=ObjectMeta(name=catalog.SETTING), value=before)
    await kube.apply(setting, field_manager=FIELD_MANAGER, force=True)


@dataclass(frozen=True)
class Owned:
    cluster: str
    owner: Person


@pytest.fixture(scope="module")
async def owned(
    kube: AsyncClient, admin: Person, node_catalog: None,
    make_user: Callable[..., Awaitable[Person]],
) -> Owned:  # fmt: skip
    cluster = await provisioned(kube)
    owner = await make_user()
    await eventually("the app to see the cluster", lambda: seen(admin.api, cluster))
    made = await admin.api.post("/v3/clusterroletemplatebindings", {
        "clusterId": cluster, "userId": owner.id, "roleTemplateId": "cluster-owner"})  # fmt: skip
    assert made.status == 201, made.body
    await eventually("the owner to see the cluster", lambda: seen(owner.api, cluster))
    return Owned(cluster, owner)


@pytest.fixture(scope="module")
def make_user(kube: AsyncClient, anonymous: Api) -> Callable[..., Awaitable[Person]]:
    """A new user (module-wide: the cluster's owner outlives one test)."""

    async def make(admin: bool = False) -> Person:
        return await write_user(kube, anonymous, admin)

    return make


async def seen(api: Api, cluster: str) -> bool:
    return (await api.get(f"/v3/clusters/{cluster}")).status == 200


async def new_token(owned: Owned, **body: Any) -> dict[str, Any]:
    made = await owned.owner.api.post(PATH, {"clusterId": owned.cluster, **body})
    assert made.status == 201, made.body
    return dict(made.body)


async def register(anonymous: Api, token: str, body: Any) -> Response:
    return await anonymous.post(REGISTER, body, headers={"Authorization": f"Bearer {token}"})


def unpack(raw: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers()}  # type: ignore[union-attr]


async def register_raw(api: Api, token: str, body: Any) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"}
    async with api.client.post(REGISTER, json=body, headers=headers) as answer:
        return answer.status, await answer.read()


def hostname() -> str:
    return "worker-" + ids.random_suffix(6)


# -- the family -----------------------------------------------------------------------------


async def test_an_owner_makes_a_token_whose_value_is_in_a_secret_not_in_the_cr(
    owned: Owned, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    token = await new_token(owned)
    assert token["id"].startswith(f"{owned.cluster}:crt-")
    assert tokens.well_formed(token["token"]) and token["state"] == "active"
    assert token["expiresAt"] == "" and token["command"] == "" and token["manifestUrl"] == ""
    assert f"--token {token['token']} " in token["nodeCommand"]
    assert "spec" not in token
    stored = crs.get_namespaced_custom_object(names.GROUP, names.VERSION, owned.cluster,
                                              names.CLUSTER_REGISTRATION_TOKEN.plural,
                                              token["name"])  # fmt: skip
    assert token["token"] not in json.dumps(stored)
    assert stored["spec"]["tokenHash"] == hashlib.sha256(token["token"].encode()).hexdigest()
    secret = core.read_namespaced_secret(stored["spec"]["secretName"], names.SYSTEM_NAMESPACE)
    assert base64.b64decode(secret.data["token"]).decode() == token["token"]


async def test_only_owners_see_tokens_members_and_others_get_404(
    owned: Owned, admin: Person, make_user: Callable[..., Awaitable[Person]]
) -> None:
    token = await new_token(owned)
    member, stranger = await make_user(), await make_user()
    made = await admin.api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": owned.cluster, "userId": member.id, "roleTemplateId": "cluster-member"},
    )
    assert made.status == 201, made.body
    await eventually("the member to see the cluster", lambda: seen(member.api, owned.cluster))
    for person in (member, stranger):
        error(await person.api.get(f"{PATH}/{token['id']}"), 404, "NotFound")
        listed = await person.api.get(f"{PATH}?clusterId={owned.cluster}")
        assert listed.status == 200 and listed.body["data"] == []
        error(await person.api.delete(f"{PATH}/{token['id']}"), 404, "NotFound")
        error(await person.api.post(f"{PATH}/{token['id']}?action=rotate"), 404, "NotFound")
        refused = await person.api.post(PATH, {"clusterId": owned.cluster})
        error(refused, 422, "InvalidReference", "clusterId")
    # Administrators see every cluster's.
    assert (await admin.api.get(f"{PATH}/{token['id']}")).body["token"] == token["token"]
    mine = await owned.owner.api.get(f"{PATH}?clusterId={owned.cluster}")
    assert token["id"] in {t["id"] for t in mine.body["data"]}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"ttl": 59}, 422, "MaxLimitExceeded"),
        ({"ttl": "1h"}, 422, "InvalidFormat"),
        ({"ttl": tokens.MAX_TTL_SECONDS + 1}, 422, "MaxLimitExceeded"),
    ],
)
async def test_a_bad_ttl_is_refused_and_nothing_is_made(
    owned: Owned, crs: k8s.CustomObjectsApi, body: dict[str, Any], status: int, code: str
) -> None:
    def count() -> int:
        return len(crs.list_namespaced_custom_object(
            names.GROUP, names.VERSION, owned.cluster, names.CLUSTER_REGISTRATION_TOKEN.plural
        )["items"])  # fmt: skip

    before = count()
    error(await owned.owner.api.post(PATH, {"clusterId": owned.cluster, **body}), status, code,
          "ttl")  # fmt: skip
    assert count() == before


async def test_a_token_for_the_local_cluster_is_refused(admin: Person) -> None:
    refused = await admin.api.post(PATH, {"clusterId": names.LOCAL_CLUSTER})
    error(refused, 422, "InvalidReference", "clusterId")


async def test_an_imported_clusters_token_starts_its_agent_and_registers_no_machine(
    admin: Person, anonymous: Api
) -> None:
    """Its token is for the agent's manifest (tests/contract/test_agents.py): it has no node
    command, and a machine presenting it joins nothing."""
    made = await admin.api.post("/v3/clusters", {"type": "cluster", "name": "imported"})
    cluster_id = made.body["id"]

    async def default_token() -> dict[str, Any] | None:
        listed = await admin.api.get(f"{PATH}?clusterId={cluster_id}")
        return next((t for t in listed.body["data"] if t["token"]), None)

    token = await eventually("the imported cluster's token", default_token)
    assert token["nodeCommand"] == "" and token["manifestUrl"]
    status, raw = await register_raw(anonymous, token["token"], {"hostname": hostname()})
    assert status == 422
    assert json.loads(raw)["code"] == "InvalidState"


async def test_a_token_with_a_ttl_says_when_it_expires(owned: Owned) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    token = await new_token(owned, ttl=3600)
    expires = datetime.datetime.fromisoformat(token["expiresAt"].replace("Z", "+00:00"))
    assert before + datetime.timedelta(seconds=3600) <= expires
    assert expires <= before + datetime.timedelta(seconds=3602)


# -- registering ------------------------------------------------------------------------------


async def test_a_machine_registers_and_its_join_credential_may_ask_for_its_certificate(
    owned: Owned, anonymous: Api, crs: k8s.CustomObjectsApi, kubeconfig: Path
) -> None:
    token = await new_token(owned)
    host = hostname()
    status, raw = await register_raw(
        anonymous,
        token["token"],
        {
            "hostname": host,
            "address": "10.9.0.7",
            "labels": {"disk": "ssd"},
            "cgroupDriver": "cgroupfs",
            "containerdSocket": "/run/containerd/containerd.sock",
        },
    )
    assert status == 200, raw
    files = unpack(raw)
    record = names.node_cr_name(host)
    node = crs.get_namespaced_custom_object(names.GROUP, names.VERSION, owned.cluster,
                                            names.NODE.plural, record)  # fmt: skip
    assert node["metadata"]["labels"][names.LABEL_NODE_SOURCE] == names.NODE_SOURCE_CUSTOM
    assert node["spec"]["requestedHostname"] == host and node["spec"]["worker"] is True
    assert node["spec"]["customConfig"] == {"address": "10.9.0.7"}
    assert (
        f"--node-labels=disk=ssd,{names.LABEL_MACHINE}={record}" in files["kubelet.args"].decode()
    )
    assert yaml.safe_load(files["kubelet.yaml"])["cgroupDriver"] == "cgroupfs"
    assets = [line.split() for line in files["assets"].decode().splitlines()]
    assert assets == [
        ["cni-plugins", "c" * 64, "https://downloads.example/cni-plugins.tgz"],
        ["kube-proxy", "b" * 64, "https://corral.contract.test/assets/kube-proxy"],
        ["kubelet", "a" * 64, "https://corral.contract.test/assets/kubelet"],
    ]
    bootstrap = yaml.safe_load(files["bootstrap.kubeconfig"])
    cluster = bootstrap["clusters"][0]["cluster"]
    join = bootstrap["users"][0]["user"]["token"]
    assert cluster["server"] == from_environment().server

    # The kubelet's TLS bootstrap with that credential: its CSR is made and read back; it
    # may not approve it, nor read another's node.
    config = k8s.Configuration(host=cluster["server"], api_key={"authorization": join},
                               api_key_prefix={"authorization": "Bearer"})  # fmt: skip
    ca = base64.b64decode(cluster["certificate-authority-data"])
    ca_file = kubeconfig.parent / f"ca-{host}.crt"
    ca_file.write_bytes(ca)
    config.ssl_ca_cert = str(ca_file)
    certificates = k8s.CertificatesV1Api(k8s.ApiClient(config))
    csr = k8s.V1CertificateSigningRequest(
        metadata=k8s.V1ObjectMeta(generate_name="node-csr-"),
        spec=k8s.V1CertificateSigningRequestSpec(
            request=base64.b64encode(kubelet_csr(host)).decode(),
            signer_name="kubernetes.io/kube-apiserver-client-kubelet",
            usages=["digital signature", "client auth"],
        ),
    )
    made = await asyncio.to_thread(certificates.create_certificate_signing_request, csr)
    name = made.metadata.name
    read = await asyncio.to_thread(certificates.read_certificate_signing_request, name)
    assert read.spec.username == f"system:serviceaccount:corral-machines:machine-{record}"
    made.status = k8s.V1CertificateSigningRequestStatus(conditions=[
        k8s.V1CertificateSigningRequestCondition(type="Approved", status="True",
                                                 reason="Self", message="no")])  # fmt: skip
    with pytest.raises(k8s.ApiException) as refused:
        await asyncio.to_thread(certificates.replace_certificate_signing_request_approval,
                                name, made)  # fmt: skip
    assert refused.value.status == 403


def kubelet_csr(host: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{host}"),
        ]
    )
    request = x509.CertificateSigningRequestBuilder().subject_name(subject)
    return request.sign(key, hashes.SHA256()).public_bytes(Encoding.PEM)


async def test_the_same_machine_registering_again_gets_its_record_back(
    owned: Owned, anonymous: Api, crs: k8s.CustomObjectsApi
) -> None:
    token = await new_token(owned)
    host = hostname()
    for _ in range(2):
        status, raw = await register_raw(anonymous, token["token"], {"hostname": host})
        assert status == 200, raw
    found = crs.list_namespaced_custom_object(
        names.GROUP, names.VERSION, owned.cluster, names.NODE.plural,
        label_selector=f"{names.LABEL_NODE_SOURCE}={names.NODE_SOURCE_CUSTOM}",
    )["items"]  # fmt: skip
    assert [n["spec"]["requestedHostname"] for n in found].count(host) == 1


async def test_a_hostname_another_machine_has_is_409(
    owned: Owned, anonymous: Api, kube: AsyncClient
) -> None:
    host = hostname()
    pool_machine = ObjectMeta(name=names.node_cr_name(host), namespace=owned.cluster)
    await kube.create(kinds.Node(metadata=pool_machine, spec={
        "requestedHostname": host, "nodePoolName": f"{owned.cluster}:np-x"}))  # fmt: skip
    token = await new_token(owned)

    async def known() -> Response | None:
        answer = await register(anonymous, token["token"], {"hostname": host})
        return answer if answer.status != 200 else None

    error(await eventually("the app to see the machine", known), 409, "AlreadyExists")


@pytest.mark.parametrize(
    "change",
    ["rotated", "deleted", "expired", "unknown", "malformed", "missing"],
)
async def test_a_token_that_registers_nothing_is_401_and_makes_nothing(
    owned: Owned, anonymous: Api, kube: AsyncClient, crs: k8s.CustomObjectsApi, change: str
) -> None:
    token = await new_token(owned)
    value = token["token"]
    if change == "rotated":
        rotated = await owned.owner.api.post(f"{PATH}/{token['id']}?action=rotate")
        assert rotated.status == 200 and rotated.body["token"] != value
        # The new value works where the old one does not.
        assert (await register(anonymous, rotated.body["token"], {"hostname": "Bad"})).status == 422
    elif change == "deleted":
        assert (await owned.owner.api.delete(f"{PATH}/{token['id']}")).status == 204
        error(await owned.owner.api.get(f"{PATH}/{token['id']}"), 404, "NotFound")
    elif change == "expired":
        past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=2)
        _, secret = await registration_tokens.create(kube, owned.cluster, ids.generate("crt"),
                                                     past, ttl=3600)  # fmt: skip
        value = registration_tokens.value_of(secret)
    elif change == "unknown":
        value = tokens.new_value()
    elif change == "malformed":
        value = "x" * 200
    host = hostname()
    headers = {} if change == "missing" else {"Authorization": f"Bearer {value}"}
    answer = await anonymous.post(REGISTER, {"hostname": host}, headers=headers)
    error(answer, 401, "Unauthorized")
    assert answer.body["message"] == "registration token is not valid"
    with pytest.raises(k8s.ApiException):
        crs.get_namespaced_custom_object(names.GROUP, names.VERSION, owned.cluster,
                                         names.NODE.plural, names.node_cr_name(host))  # fmt: skip


async def test_a_users_api_token_is_not_a_registration_token(owned: Owned, anonymous: Api) -> None:
    assert owned.owner.api.token is not None
    error(await register(anonymous, owned.owner.api.token, {"hostname": hostname()}), 401,
          "Unauthorized")  # fmt: skip


async def test_concurrent_rotations_one_wins_the_other_is_409(owned: Owned) -> None:
    token = await new_token(owned)
    answers = await asyncio.gather(*(
        owned.owner.api.post(f"{PATH}/{token['id']}?action=rotate") for _ in range(4)))  # fmt: skip
    statuses = sorted(a.status for a in answers)
    assert 200 in statuses and set(statuses) <= {200, 409}
    shown = await owned.owner.api.get(f"{PATH}/{token['id']}")
    won = {a.body["token"] for a in answers if a.status == 200}
    assert shown.body["token"] in won


@pytest.mark.parametrize(
    ("body", "field"),
    [({"hostname": "w", "roles": ["etcd"]}, "roles"), ({"hostname": "UPPER"}, "hostname"),
     ({"hostname": "w", "containerdSocket": "../x"}, "containerdSocket")],
)  # fmt: skip
async def test_a_bad_registration_is_422_and_makes_nothing(
    owned: Owned, anonymous: Api, body: dict[str, Any], field: str
) -> None:
    token = await new_token(owned)
    answer = await register(anonymous, token["token"], body)
    assert answer.status == 422 and answer.body["fieldName"] == field, answer.body


async def test_a_registration_body_is_bounded(owned: Owned, anonymous: Api) -> None:
    token = await new_token(owned)
    answer = await register(anonymous, token["token"], {"hostname": "w", "pad": "x" * 20_000})
    assert answer.status == 413, answer.body


async def test_a_cluster_not_ready_or_without_real_machines_is_422(
    kube: AsyncClient, admin: Person, anonymous: Api, node_catalog: None
) -> None:
    for cluster, says in ((await provisioned(kube, ready=False), "InvalidState"),
                          (await provisioned(kube, OLD_VERSION), "InvalidOption")):  # fmt: skip
        await eventually("the app to see the cluster", lambda c=cluster: seen(admin.api, c))  # type: ignore[misc]
        made = await admin.api.post(PATH, {"clusterId": cluster})
        assert made.status == 201, made.body
        error(await register(anonymous, made.body["token"], {"hostname": hostname()}), 422, says)


async def test_a_cluster_corral_cannot_reach_is_503_and_nothing_is_made(
    kube: AsyncClient, admin: Person, anonymous: Api, node_catalog: None,
    crs: k8s.CustomObjectsApi,
) -> None:  # fmt: skip
    cluster = await provisioned(kube, reachable=False)
    await eventually("the app to see the cluster", lambda: seen(admin.api, cluster))
    made = await admin.api.post(PATH, {"clusterId": cluster})
    assert made.status == 201, made.body
    host = hostname()
    error(await register(anonymous, made.body["token"], {"hostname": host}), 503,
          "ClusterUnavailable")  # fmt: skip
    with pytest.raises(k8s.ApiException):
        crs.get_namespaced_custom_object(names.GROUP, names.VERSION, cluster, names.NODE.plural,
                                         names.node_cr_name(host))  # fmt: skip


async def test_a_machines_own_token_registers_that_machine_once(
    owned: Owned, anonymous: Api, kube: AsyncClient
) -> None:
    host = hostname()
    record = names.node_cr_name(host)
    meta = ObjectMeta(name=record, namespace=owned.cluster)
    await kube.create(
        kinds.Node(
            metadata=meta,
            spec={
                "requestedHostname": host,
                "nodePoolName": f"{owned.cluster}:np-y",
                "worker": True,
            },
        )
    )
    value = await registration_tokens.issue_for_machine(
        kube, owned.cluster, record, datetime.datetime.now(datetime.UTC)
    )

    async def answered(body: dict[str, Any]) -> Response:
        async def probe() -> Response | None:
            answer = await register(anonymous, value, body)
            return answer if answer.status != 401 else None

        return await eventually("the app to see the machine's token", probe)

    error(await answered({"hostname": hostname()}), 409, "Conflict")
    status, raw = await register_raw(anonymous, value, {"hostname": host})
    assert status == 200, raw
    error(await register(anonymous, value, {"hostname": host}), 401, "Unauthorized")


async def test_a_pool_machine_registers_with_its_pools_name_and_its_records_taints(
    owned: Owned, anonymous: Api, kube: AsyncClient
) -> None:
    """The node command a pool's driver runs names no label: the registration labels the node
        with its pool's name, which pods select the pool by (and the autoscaler's template node
        carries), beside the installer's own labels, and gives it the taints its record asks for
    rather than the installer's."""
    host = hostname()
    record = names.node_cr_name(host)
    taint = {"key": "dedicated", "value": "lab", "effect": "NoSchedule"}
    await kube.create(kinds.Node(
        metadata=ObjectMeta(name=record, namespace=owned.cluster),
        spec={"requestedHostname": host, "nodePoolName": f"{owned.cluster}:np-lab",
              "worker": True, "desiredNodeTaints": [taint]},
    ))  # fmt: skip
    value = await registration_tokens.issue_for_machine(
        kube, owned.cluster, record, datetime.datetime.now(datetime.UTC)
    )

    async def registered() -> tuple[int, bytes] | None:
        body = {
            "hostname": host,
            "labels": {"zone": "a"},
            "taints": [{"key": "other", "effect": "NoExecute"}],
        }
        answer = await register_raw(anonymous, value, body)
        return answer if answer[0] != 401 else None

    status, raw = await eventually("the app to see the machine's token", registered)
    assert status == 200, raw
    files = unpack(raw)
    labels = f"{names.LABEL_MACHINE}={record},{names.LABEL_NODE_POOL}=np-lab,zone=a"
    assert f"--node-labels={labels}" in files["kubelet.args"].decode().splitlines()
    assert yaml.safe_load(files["kubelet.yaml"])["registerWithTaints"] == [taint]


async def test_the_installer_and_ca_are_public(anonymous: Api) -> None:
    async with anonymous.client.get("/v3/connect/install.sh") as answer:
        assert answer.status == 200
        assert (await answer.text()).startswith("#!/bin/sh")
    async with anonymous.client.get("/v3/connect/uninstall.sh") as answer:
        assert answer.status == 200
    # This app was given no CA of its own.
    error(await anonymous.get("/cacerts"), 404, "NotFound")
    # Nothing else under /v3/connect is let past authentication.
    error(await anonymous.get("/v3/connect/other"), 401, "Unauthorized")


# -- the pinned download, with curl ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
async def served_tls(tmp_path_factory: pytest.TempPathFactory,
                     kubeconfig: Path) -> AsyncIterator[tuple[str, bytes, Path]]:  # fmt: skip
    """The application served over HTTPS with a CA of its own, as `corral-apiserver` is."""
    directory = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority.create("registration-contract-ca")
    pair = ca.issue_server("corral", ["127.0.0.1"])
    cert, key = pair.write(directory, "serving")
    ca_file = directory / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    app = create_app(kube_client.async_client(), parse_features(""), url, ca.cert_pem,
                     serving_cert=pair.cert, tls=context)  # fmt: skip
    server = TestServer(app, host="127.0.0.1", port=port)
    await server.start_server(ssl=context)
    client_context = ssl.create_default_context(cafile=str(ca_file))
    async with aiohttp.ClientSession() as session:

        async def ready() -> bool:
            async with session.get(f"{url}/readyz", ssl=client_context) as answer:
                return answer.status == 200

        await eventually("the TLS app's readiness", ready)
    yield url, ca.cert_pem, ca_file
    await server.close()


async def curl(*args: str) -> tuple[int, bytes]:
    process = await asyncio.create_subprocess_exec(
        "curl", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await process.communicate()
    return process.returncode or 0, out


async def test_the_node_commands_pinned_download_is_the_installer_and_a_wrong_pin_fails(
    owned: Owned, served_tls: tuple[str, bytes, Path]
) -> None:
    url, ca, ca_file = served_tls
    token = await new_token(owned)
    async with aiohttp.ClientSession() as session:

        async def shown() -> dict[str, Any] | None:
            async with session.get(f"{url}{PATH}/{token['id']}",
                                   ssl=ssl.create_default_context(cafile=str(ca_file)),
                                   headers={"Authorization": f"Bearer {owned.owner.api.token}"},
                                   ) as answer:  # fmt: skip
                return dict(await answer.json()) if answer.status == 200 else None

        body = await eventually("the TLS app to show the token", shown)
    fetch, install = body["nodeCommand"].split(" | ")
    words = shlex.split(fetch)
    assert words[:2] == ["curl", "-fsSL"] and "-k" in words
    assert shlex.split(install)[shlex.split(install).index("--ca-checksum") + 1] == (
        hashlib.sha256(ca).hexdigest()
    )
    script = (ROOT / "apiserver" / "corral" / "apiserver" / "node" / "install.sh").read_bytes()

    status, out = await curl(*words[1:])
    assert status == 0 and out == script

    pin = words.index("--pinnedpubkey") + 1
    wrong = "sha256//" + base64.b64encode(hashlib.sha256(b"another key").digest()).decode()
    status, out = await curl(*words[1:pin], wrong, *words[pin + 1 :])
    assert status == 90 and out == b""  # CURLE_SSL_PINNEDPUBKEYNOTMATCH

    # What the installer does next: /cacerts has the checksum the command gives.
    status, out = await curl("-fsSk", f"{url}/cacerts")
    assert status == 0 and out == ca
