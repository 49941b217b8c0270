"""`POST /v3/nodes` with `customConfig`: an existing machine added over SSH to a provisioned
cluster. What a request writes (the record, the Secret with the key), what responses show (never
the key), and what is refused (nothing written). No operator runs: nothing connects to the
machine here (tests/e2e/test_ssh_machines.py does)."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from kubernetes import client as k8s
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.core.api import ids, names
from corral.core.kube import kinds
from corral.core.kube.client import ensure_namespace

from .client import error, eventually
from .conftest import Person

GROUP, VERSION = names.GROUP, names.VERSION


def private_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()


def encrypted_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ).decode()


def hostname() -> str:
    return f"machine-{secrets.token_hex(3)}"


def body(cluster: str, host: str, key: str, **extra: Any) -> dict[str, Any]:
    return {"type": "node", "clusterId": cluster, "requestedHostname": host,
            "customConfig": {"address": "10.9.0.4", "user": "ubuntu", "sshKey": key},
            **extra}  # fmt: skip


@pytest.fixture(scope="module")
async def k3s(kube: AsyncClient, admin: Person) -> str:
    """A k3s cluster as the operator leaves one it is still provisioning: the Cluster and its
    namespace, where its machines' records go."""
    cluster_id = ids.generate("c-m")
    spec = {"displayName": "ssh", "driver": "k3s", "kubernetesVersion": "v1.36.0+k3s1"}
    await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id), spec=spec))
    await ensure_namespace(kube, cluster_id, {names.LABEL_CLUSTER: cluster_id})

    async def seen() -> bool:
        return (await admin.api.get(f"/v3/clusters/{cluster_id}")).status == 200

    await eventually(f"the app to see cluster {cluster_id}", seen)
    return cluster_id


async def grant(admin: Person, cluster: str, person: Person, role: str) -> None:
    made = await admin.api.post("/v3/clusterroletemplatebindings",
                                {"clusterId": cluster, "userId": person.id,
                                 "roleTemplateId": role})  # fmt: skip
    assert made.status == 201, made.body


def records(crs: k8s.CustomObjectsApi, cluster: str) -> dict[str, dict[str, Any]]:
    items = crs.list_namespaced_custom_object(GROUP, VERSION, cluster, "nodes")["items"]
    return {r["spec"]["requestedHostname"]: r for r in items}


def key_secrets(core: k8s.CoreV1Api, cluster: str) -> list[k8s.V1Secret]:
    return list(
        core.list_namespaced_secret(
            names.SYSTEM_NAMESPACE,
            label_selector=f"{names.LABEL_CLUSTER}={cluster},{names.LABEL_SSH_KEY}",
        ).items
    )


async def test_an_owner_adds_a_machine_whose_key_is_kept_in_a_secret_and_never_shown(
    admin: Person, make_user: Callable[..., Awaitable[Person]], k3s: str,
    crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api,
) -> None:  # fmt: skip
    owner = await make_user()
    await grant(admin, k3s, owner, "cluster-owner")
    key, host = private_key(), hostname()
    made = await owner.api.post("/v3/nodes", body(k3s, host, key, displayName="Rack 3"))
    assert made.status == 201, made.body
    record = names.node_cr_name(host)
    assert made.body["id"] == f"{k3s}:{record}"
    assert made.body["requestedHostname"] == host and made.body["clusterId"] == k3s
    assert made.body["customConfig"] == {"address": "10.9.0.4", "user": "ubuntu"}
    assert (made.body["worker"], made.body["etcd"], made.body["controlPlane"]) == (
        True, False, False)  # fmt: skip
    assert made.body["links"]["self"].endswith(f"/v3/clusters/{k3s}/nodes/{record}")

    stored = records(crs, k3s)[host]
    assert stored["metadata"]["name"] == record
    assert stored["metadata"]["labels"] == {names.LABEL_NODE_SOURCE: names.NODE_SOURCE_SSH}
    secret_name = names.ssh_key_secret_name(k3s, record)
    assert stored["spec"]["customConfig"] == {"address": "10.9.0.4", "user": "ubuntu",
                                              "sshKeySecretName": secret_name}  # fmt: skip
    assert stored["spec"]["displayName"] == "Rack 3" and stored["spec"]["worker"] is True
    secret = core.read_namespaced_secret(secret_name, names.SYSTEM_NAMESPACE)
    assert base64.b64decode(secret.data[names.SSH_KEY_FIELD]).decode() == key
    assert secret.metadata.labels == {names.LABEL_CLUSTER: k3s, names.LABEL_SSH_KEY: record}

    # Nothing any response says holds the key, however it is asked for.
    shown = [made.body]
    shown.append(
        (await eventually("the node in the cache",
                          lambda: _found(owner, f"/v3/clusters/{k3s}/nodes/{record}"))).body
    )  # fmt: skip
    shown.append((await owner.api.get(f"/v3/clusters/{k3s}/nodes")).body)
    shown.append((await owner.api.get(f"/v3/clusters/{k3s}/nodes/{k3s}:{record}")).body)
    for answer in shown:
        text = json.dumps(answer)
        assert 'sshKey"' not in text and "PRIVATE KEY" not in text, text
        assert key.splitlines()[1] not in text


async def _found(person: Person, path: str) -> Any:
    answer = await person.api.get(path)
    return answer if answer.status == 200 else None


async def test_a_clusters_own_collection_adds_a_machine_too(
    admin: Person, k3s: str, crs: k8s.CustomObjectsApi
) -> None:
    host = hostname()
    nested = body(k3s, host, private_key())
    del nested["clusterId"]
    made = await admin.api.post(f"/v3/clusters/{k3s}/nodes", nested)
    assert made.status == 201, made.body
    assert host in records(crs, k3s)
    other = body("c-m-other", hostname(), private_key())
    error(await admin.api.post(f"/v3/clusters/{k3s}/nodes", other), 422, "InvalidFormat",
          "clusterId")  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field", "code"),
    [
        ({"etcd": True}, "etcd", "InvalidOption"),
        ({"controlPlane": True}, "controlPlane", "InvalidOption"),
        ({"worker": False}, "worker", "InvalidOption"),
        ({"customConfig": None}, "customConfig", "MissingRequired"),
        ({"customConfig": {"address": "10.9.0.4", "sshKey": "not a key"}},
         "customConfig.sshKey", "InvalidFormat"),
        ({"customConfig": {"address": "10.9.0.4", "sshKey": encrypted_key()}},
         "customConfig.sshKey", "InvalidFormat"),
        ({"customConfig": {"address": "127.0.0.1", "sshKey": private_key()}},
         "customConfig.address", "InvalidFormat"),
        ({"customConfig": {"address": "169.254.169.254", "sshKey": private_key()}},
         "customConfig.address", "InvalidFormat"),
        ({"customConfig": {"address": "10.9.0.4", "sshKey": private_key(), "user": "a;b"}},
         "customConfig.user", "InvalidFormat"),
        ({"customConfig": {"address": "10.9.0.4", "sshKey": private_key(), "port": 2222}},
         "customConfig.port", None),
        ({"requestedHostname": "Not_A_Name"}, "requestedHostname", "InvalidFormat"),
        ({"customConfig": {"address": "10.9.0.4", "sshKey": "k" * 20000}},
         "customConfig.sshKey", "InvalidFormat"),
    ],
)  # fmt: skip
async def test_bad_input_is_422_naming_the_field_and_stores_nothing(
    admin: Person, k3s: str, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api,
    change: dict[str, Any], field: str, code: str | None,
) -> None:  # fmt: skip
    host = hostname()
    before = len(key_secrets(core, k3s))
    answer = await admin.api.post("/v3/nodes", {**body(k3s, host, private_key()), **change})
    assert answer.status == 422, answer.body
    assert answer.body["fieldName"] == field, answer.body
    if code:
        assert answer.body["code"] == code, answer.body
    assert "PRIVATE KEY" not in json.dumps(answer.body)
    assert change.get("requestedHostname", host) not in records(crs, k3s)
    assert len(key_secrets(core, k3s)) == before


async def test_only_provisioned_clusters_take_machines_over_ssh(
    admin: Person, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    answer = await admin.api.post("/v3/nodes", body(cluster, hostname(), private_key()))
    error(answer, 422, "InvalidOption", "clusterId")
    assert "rke2" in answer.body["message"] and "k3s" in answer.body["message"]


async def test_members_may_not_add_machines_and_others_do_not_see_the_cluster(
    admin: Person, make_user: Callable[..., Awaitable[Person]], k3s: str,
    crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api,
) -> None:  # fmt: skip
    member, stranger = await make_user(), await make_user()
    await grant(admin, k3s, member, "cluster-member")
    before = len(key_secrets(core, k3s))
    host = hostname()
    error(await member.api.post("/v3/nodes", body(k3s, host, private_key())), 403,
          "PermissionDenied")  # fmt: skip
    error(await member.api.post(f"/v3/clusters/{k3s}/nodes", body(k3s, host, private_key())),
          403, "PermissionDenied")  # fmt: skip
    # A cluster the caller cannot see is no reference, exactly as one that does not exist.
    error(await stranger.api.post("/v3/nodes", body(k3s, host, private_key())), 422,
          "InvalidReference", "clusterId")  # fmt: skip
    error(await stranger.api.post("/v3/nodes", body("c-m-nothere", host, private_key())), 422,
          "InvalidReference", "clusterId")  # fmt: skip
    error(await stranger.api.post(f"/v3/clusters/{k3s}/nodes", body(k3s, host, private_key())),
          404, "NotFound")  # fmt: skip
    assert host not in records(crs, k3s)
    assert len(key_secrets(core, k3s)) == before


async def test_a_hostname_is_one_machine(admin: Person, k3s: str, core: k8s.CoreV1Api) -> None:
    host, key = hostname(), private_key()
    assert (await admin.api.post("/v3/nodes", body(k3s, host, key))).status == 201
    again = await admin.api.post("/v3/nodes", body(k3s, host, private_key()))
    error(again, 409, "AlreadyExists")
    record = names.node_cr_name(host)
    secret = core.read_namespaced_secret(names.ssh_key_secret_name(k3s, record),
                                         names.SYSTEM_NAMESPACE)  # fmt: skip
    assert base64.b64decode(secret.data[names.SSH_KEY_FIELD]).decode() == key


async def test_deleting_a_machine_added_over_ssh_deletes_its_record_for_the_operator(
    admin: Person, k3s: str, crs: k8s.CustomObjectsApi
) -> None:
    host = hostname()
    made = await admin.api.post("/v3/nodes", body(k3s, host, private_key()))
    assert made.status == 201, made.body
    record = names.node_cr_name(host)
    await eventually("the node in the cache",
                     lambda: _found(admin, f"/v3/clusters/{k3s}/nodes/{record}"))  # fmt: skip
    # The operator's finalizer from the start: a machine deleted before the operator first
    # saw it is still uninstalled.
    assert records(crs, k3s)[host]["metadata"]["finalizers"] == [names.FINALIZER_OPERATOR]
    answer = await admin.api.delete(f"/v3/clusters/{k3s}/nodes/{record}")
    assert answer.status == 204, answer.body
    # No operator runs in this tier: the record waits, marked, for its handler.
    assert records(crs, k3s)[host]["metadata"]["deletionTimestamp"]


async def test_a_cluster_whose_namespace_is_not_made_yet_is_503_and_keeps_no_key(
    kube: AsyncClient, admin: Person, core: k8s.CoreV1Api
) -> None:
    cluster_id = ids.generate("c-m")
    spec = {"displayName": "new", "driver": "k3s", "kubernetesVersion": "v1.36.0+k3s1"}
    await kube.create(kinds.Cluster(metadata=ObjectMeta(name=cluster_id), spec=spec))

    async def seen() -> bool:
        return (await admin.api.get(f"/v3/clusters/{cluster_id}")).status == 200

    await eventually(f"the app to see cluster {cluster_id}", seen)
    answer = await admin.api.post("/v3/nodes", body(cluster_id, hostname(), private_key()))
    error(answer, 503, "ClusterUnavailable")
    assert "in a moment" in answer.body["message"]
    assert key_secrets(core, cluster_id) == []
