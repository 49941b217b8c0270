"""Node templates and cloud credentials through /v3 against the real stack: create, read,
update and delete of both; a kwok template's config checked against the kwok schema; a driver
that is not active refused; a credential's secret in its Secret and in no response; another
user neither sees nor uses them; a driver or a credential in use cannot be deleted; and
deleting a user removes what they owned."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from lightkube import AsyncClient, KubeConfig

from corral.core.api import names
from corral.core.kube import templates as template_inputs
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .. import fake_driver
from .api import Api
from .conftest import Person

READY_TIMEOUT = 30
# Kubernetes' garbage collector follows the kinds of a fresh stack's CRDs from its discovery
# resync (every 30 s) on, and deletes an owned object only once it follows its kind.
GC_TIMEOUT = 90
GROUP, VERSION = names.GROUP, names.VERSION


@pytest.fixture(scope="module")
def cloud(api: Api, stack: Environment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A driver with a secret field (`apiKey`) from a file on the operator's host (in the
    directory the stack allows file urls below), Ready."""
    root = tmp_path_factory.mktemp("cloud-driver")
    name = f"cloud{secrets.token_hex(3)}"
    path = fake_driver.write(stack.driver_files / name, root / "state", name)
    checksum = hashlib.sha256(path.read_bytes()).hexdigest()
    created = api.post(
        "/v3/nodedrivers",
        {"name": name, "active": True, "url": f"file://{path}", "checksum": checksum},
    )
    assert created.status == 201, created.body
    wait_for(
        f"driver {name} ready",
        lambda: api.get(f"/v3/nodedrivers/{name}").body["state"] == "active",
        READY_TIMEOUT,
    )
    yield name
    assert api.delete(f"/v3/nodedrivers/{name}").status == 204


@pytest.fixture
def made(api: Api) -> Iterator[Callable[[Api, str, dict[str, Any]], dict[str, Any]]]:
    """Creates templates and credentials (`nodetemplates` or `cloudcredentials`) as a user and
    deletes what is left of them afterwards, templates first."""
    created: list[tuple[str, str]] = []

    def make(who: Api, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        response = who.post(f"/v3/{kind}", body)
        assert response.status == 201, response.body
        created.append((kind, response.body["id"]))
        return dict(response.body)

    yield make
    for kind, obj_id in sorted(created, key=lambda c: c[0] != "nodetemplates"):
        assert api.delete(f"/v3/{kind}/{obj_id}").status in (204, 404)


def refused(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status == status, response.body
    body: dict[str, Any] = response.body
    assert body["type"] == "error" and body["status"] == status
    if field is not None:
        assert body["fieldName"] == field, body
    return body


def ids(api: Api, kind: str) -> set[str]:
    return {o["id"] for o in api.get(f"/v3/{kind}").body["data"]}


def test_a_kwok_template_is_checked_against_the_kwok_schema_and_has_full_crud(
    api: Api, crs: k8s.CustomObjectsApi, made: Callable[..., dict[str, Any]]
) -> None:
    before = ids(api, "nodetemplates")
    for config, field in (
        ({"cpu": True}, "kwokConfig.cpu"),
        ({"gpu": "1"}, "kwokConfig.gpu"),
        ({"pods": "many"}, "kwokConfig.pods"),
    ):
        body = refused(api.post("/v3/nodetemplates", {"kwokConfig": config}), 422, field)
        assert field in body["message"]
    refused(
        api.post(
            "/v3/nodetemplates",
            {"kwokConfig": {}, "nodeTaints": [{"key": "a b", "effect": "NoSchedule"}]},
        ),
        422,
        "nodeTaints",
    )
    refused(api.post("/v3/nodetemplates", {"name": "no driver"}), 422, "driver")
    assert ids(api, "nodetemplates") == before

    taint = {"key": "pool", "value": "small", "effect": "NoSchedule"}
    template = made(
        api,
        "nodetemplates",
        {
            "type": "nodeTemplate",
            "name": "small",
            "kwokConfig": {"cpu": "2"},
            "nodeTaints": [taint],
        },
    )
    assert template["id"].startswith("nt-") and template["type"] == "nodeTemplate"
    assert (template["driver"], template["name"], template["nodeTaints"]) == (
        "kwok",
        "small",
        [taint],
    )
    assert template["kwokConfig"] == {"cpu": "2", "memory": "8Gi", "pods": 110}
    assert (
        api.get(f"/v3/nodetemplates/{template['id']}").body["kwokConfig"]
        == (template["kwokConfig"])
    )
    assert template["id"] in ids(api, "nodetemplates")
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "nodetemplates", template["id"])
    admin_id = stored["metadata"]["annotations"][names.ANNOTATION_CREATOR]
    assert template["creatorId"] == admin_id
    assert [(o["kind"], o["name"]) for o in stored["metadata"]["ownerReferences"]] == [
        ("User", admin_id)
    ]

    # The config is replaced whole: what it leaves out goes back to its default.
    url = f"/v3/nodetemplates/{template['id']}"
    changed = api.put(url, {"kwokConfig": {"memory": "16Gi"}, "description": "bigger"})
    assert changed.status == 200, changed.body
    assert changed.body["kwokConfig"] == {"cpu": "4", "memory": "16Gi", "pods": 110}
    assert changed.body["description"] == "bigger" and changed.body["nodeTaints"] == [taint]
    refused(api.put(url, {"kwokConfig": {"cpu": "4 cores"}}), 422, "kwokConfig.cpu")
    refused(api.put(url, {"driver": "other"}), 422, "driver")
    # kubectl is held to it too, by the CRD.
    with pytest.raises(ApiException) as immutable:
        crs.patch_cluster_custom_object(
            GROUP, VERSION, "nodetemplates", template["id"], {"spec": {"driver": "other"}}
        )
    assert immutable.value.status == 422 and "driver is immutable" in str(immutable.value.body)
    assert api.get(url).body["kwokConfig"]["memory"] == "16Gi"

    assert api.delete(url).status == 204
    refused(api.get(url), 404)
    assert template["id"] not in ids(api, "nodetemplates")


def test_a_template_of_a_driver_that_is_unknown_or_not_active_is_refused(api: Api) -> None:
    name = f"off{secrets.token_hex(3)}"
    inactive = api.post(
        "/v3/nodedrivers",
        {"name": name, "active": False, "url": "https://example.com/corral-driver"},
    )
    assert inactive.status == 201, inactive.body
    try:
        body = refused(api.post("/v3/nodetemplates", {"driver": name}), 422, "driver")
        assert "not active" in body["message"]
        refused(api.post("/v3/nodetemplates", {f"{name}Config": {}}), 422, "driver")
        refused(api.post("/v3/nodetemplates", {"nosuchConfig": {}}), 422, "driver")
    finally:
        assert api.delete(f"/v3/nodedrivers/{name}").status == 204


def test_a_credentials_secret_is_kept_in_its_secret_and_never_returned(
    api: Api,
    stack: Environment,
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
    cloud: str,
    made: Callable[..., dict[str, Any]],
) -> None:
    key, rotated = f"key-{secrets.token_hex(8)}", f"key-{secrets.token_hex(8)}"
    field = f"{cloud}credentialConfig"
    seen: list[Any] = []

    def shown(response: Any) -> Any:
        seen.append(response.body)
        return response

    refused(api.post("/v3/cloudcredentials", {field: {"region": "eu"}}), 422, f"{field}.region")
    refused(api.post("/v3/cloudcredentials", {field: {"apiKey": 7}}), 422, f"{field}.apiKey")
    credential = made(
        api, "cloudcredentials", {"type": "cloudCredential", "name": "mine", field: {"apiKey": key}}
    )
    seen.append(credential)
    cc = credential["id"]
    assert cc.startswith("cc-")
    assert (credential["driver"], credential["credentialFields"]) == (cloud, ["apiKey"])
    shown(api.get(f"/v3/cloudcredentials/{cc}"))
    shown(api.get("/v3/cloudcredentials"))

    core = k8s.CoreV1Api(management)
    secret = core.read_namespaced_secret(names.cloud_credential_secret_name(cc), "svc-system")
    assert json.loads(base64.b64decode(secret.data["apiKey"])) == key
    assert [(o.kind, o.name) for o in secret.metadata.owner_references] == [("CloudCredential", cc)]
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "cloudcredentials", cc)
    assert key not in json.dumps(stored)

    # A template takes the plain fields; the secret one only from the credential.
    config = f"{cloud}Config"
    misplaced = api.post("/v3/nodetemplates", {config: {"region": "eu", "apiKey": key}})
    seen.append(refused(misplaced, 422, f"{config}.apiKey"))
    refused(api.post("/v3/nodetemplates", {config: {}}), 422, f"{config}.region")
    template = made(api, "nodetemplates", {config: {"region": "eu"}, "cloudCredentialName": cc})
    assert template[config] == {"region": "eu", "size": 2}
    shown(api.get(f"/v3/nodetemplates/{template['id']}"))

    # PUT replaces the secret field; still never shown.
    assert (
        shown(
            api.put(
                f"/v3/cloudcredentials/{cc}", {field: {"apiKey": rotated}, "description": "rotated"}
            )
        ).status
        == 200
    )
    secret = core.read_namespaced_secret(names.cloud_credential_secret_name(cc), "svc-system")
    assert json.loads(base64.b64decode(secret.data["apiKey"])) == rotated
    refused(
        api.put(f"/v3/cloudcredentials/{cc}", {"kwokcredentialConfig": {}}),
        422,
        "kwokcredentialConfig",
    )
    for body in seen:
        assert key not in json.dumps(body) and rotated not in json.dumps(body)

    # What a node pool will hand the driver for a machine of this template.
    inputs = asyncio.run(_machine_inputs(stack.management_kubeconfig, template["id"]))
    assert (inputs.driver, inputs.config, inputs.credential) == (
        cloud,
        {"region": "eu", "size": 2},
        {"apiKey": rotated},
    )

    # In use: neither the credential nor the driver can go.
    body = refused(api.delete(f"/v3/cloudcredentials/{cc}"), 409)
    assert template["id"] in body["message"]
    body = refused(api.delete(f"/v3/nodedrivers/{cloud}"), 409)
    assert template["id"] in body["message"]
    assert api.delete(f"/v3/nodetemplates/{template['id']}").status == 204
    assert api.delete(f"/v3/cloudcredentials/{cc}").status == 204
    refused(api.get(f"/v3/cloudcredentials/{cc}"), 404)
    gone = core.list_namespaced_secret(
        "svc-system", label_selector=f"{names.LABEL_CLOUD_CREDENTIAL}={cc}"
    )
    assert gone.items == []


async def _machine_inputs(kubeconfig: Path, template: str) -> template_inputs.MachineInputs:
    kube = AsyncClient(KubeConfig.from_file(kubeconfig))
    try:
        return await template_inputs.machine_inputs(kube, template)
    finally:
        await kube.close()


def test_another_user_neither_sees_nor_uses_a_template_or_credential(
    api: Api,
    crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
    make_user: Callable[..., Person],
    cloud: str,
    made: Callable[..., dict[str, Any]],
) -> None:
    alice, bob = make_user(), make_user()
    field, config = f"{cloud}credentialConfig", f"{cloud}Config"
    credential = made(alice.api, "cloudcredentials", {field: {"apiKey": "alice's"}})
    template = made(
        alice.api,
        "nodetemplates",
        {config: {"region": "eu"}, "cloudCredentialName": credential["id"]},
    )
    assert template["creatorId"] == alice.id == credential["creatorId"]
    for kind, obj in (("cloudcredentials", credential), ("nodetemplates", template)):
        url = f"/v3/{kind}/{obj['id']}"
        refused(bob.api.get(url), 404)
        refused(bob.api.put(url, {"description": "bob's"}), 404)
        refused(bob.api.delete(url), 404)
        assert obj["id"] not in ids(bob.api, kind)
        # Administrators see everyone's.
        assert api.get(url).status == 200 and obj["id"] in ids(api, kind)
    # Nobody's template but alice's may use her credential, not even an administrator's.
    use = {config: {"region": "eu"}, "cloudCredentialName": credential["id"]}
    for other in (bob.api, api):
        body = refused(other.post("/v3/nodetemplates", use), 422, "cloudCredentialName")
        assert body["code"] == "InvalidReference"
    # Nor one of another driver.
    kwok_credential = made(alice.api, "cloudcredentials", {"kwokcredentialConfig": {}})
    refused(
        alice.api.put(
            f"/v3/nodetemplates/{template['id']}", {"cloudCredentialName": kwok_credential["id"]}
        ),
        422,
        "cloudCredentialName",
    )

    # Alice's things go with her: the User owns them, the credential its Secret.
    assert api.delete(f"/v3/users/{alice.id}").status in (200, 204)
    core = k8s.CoreV1Api(management)
    selector = f"{names.LABEL_CLOUD_CREDENTIAL}={credential['id']}"
    wait_for(
        "alice's templates, credentials and their Secret gone",
        lambda: (
            not any(
                o["metadata"]["annotations"].get(names.ANNOTATION_CREATOR) == alice.id
                for kind in ("nodetemplates", "cloudcredentials")
                for o in crs.list_cluster_custom_object(GROUP, VERSION, kind)["items"]
            )
            and not core.list_namespaced_secret("svc-system", label_selector=selector).items
        ),
        GC_TIMEOUT,
    )
