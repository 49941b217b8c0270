"""`/v3/cloudcredentials`: secret fields kept in a Secret of svc-system, never returned, and
only their owner's (and administrators') to see."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
SECRET_KEY = "s3cr3t-never-shown"


async def create_s3(person: Person, **fields: Any) -> dict[str, Any]:
    body = {
        "name": "backups",
        "s3credentialConfig": {"accessKey": "AKIA1", "secretKey": SECRET_KEY},
        **fields,
    }
    made = await person.api.post("/v3/cloudcredentials", body)
    assert made.status == 201, made.body
    return dict(made.body)


def secret_values(core: k8s.CoreV1Api, credential: str) -> dict[str, Any]:
    secret = core.read_namespaced_secret(f"{credential}-secret", names.SYSTEM_NAMESPACE)
    return {k: json.loads(base64.b64decode(v)) for k, v in (secret.data or {}).items()}


async def test_a_credential_keeps_its_values_in_a_secret_and_shows_none(
    user: Person, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    made = await create_s3(user, description="for etcd")
    credential = made["id"]
    assert credential.startswith("cc-") and made["type"] == "cloudCredential"
    assert made["name"] == "backups" and made["description"] == "for etcd"
    assert made["driver"] == "s3" and made["credentialFields"] == ["accessKey", "secretKey"]
    assert made["creatorId"] == user.id and made["state"] == "active"
    assert made["links"]["nodeTemplates"] == (
        f"{EXTERNAL_URL}/v3/nodetemplates?cloudCredentialName={credential}"
    )
    assert "nodeDriver" not in made["links"]  # s3 is corral's own kind, no driver's
    assert SECRET_KEY not in json.dumps(made)

    stored = crs.get_cluster_custom_object(GROUP, VERSION, "cloudcredentials", credential)
    assert SECRET_KEY not in json.dumps(stored)
    assert stored["metadata"]["annotations"][names.ANNOTATION_CREATOR] == user.id
    assert secret_values(core, credential) == {"accessKey": "AKIA1", "secretKey": SECRET_KEY}

    shown = await user.api.get(f"/v3/cloudcredentials/{credential}")
    assert shown.status == 200 and SECRET_KEY not in json.dumps(shown.body)


async def test_another_users_credential_is_404_and_unlisted(admin: Person, user: Person) -> None:
    theirs = (await create_s3(admin))["id"]
    error(await user.api.get(f"/v3/cloudcredentials/{theirs}"), 404, "NotFound")
    error(await user.api.put(f"/v3/cloudcredentials/{theirs}", {"name": "x"}), 404, "NotFound")
    error(await user.api.delete(f"/v3/cloudcredentials/{theirs}"), 404, "NotFound")
    listed = await user.api.get("/v3/cloudcredentials")
    assert theirs not in {c["id"] for c in listed.body["data"]}
    assert {c["creatorId"] for c in listed.body["data"]} <= {user.id}
    everyone = await admin.api.get(f"/v3/cloudcredentials?creatorId={admin.id}")
    assert theirs in {c["id"] for c in everyone.body["data"]}


async def test_an_update_replaces_the_fields_given_and_keeps_the_others(
    user: Person, core: k8s.CoreV1Api
) -> None:
    credential = (await create_s3(user))["id"]
    changed = await user.api.put(f"/v3/cloudcredentials/{credential}",
                                 {"name": "renamed",
                                  "s3credentialConfig": {"accessKey": "AKIA2"}})  # fmt: skip
    assert changed.status == 200, changed.body
    assert changed.body["name"] == "renamed"
    assert secret_values(core, credential) == {"accessKey": "AKIA2", "secretKey": SECRET_KEY}
    removed = await user.api.put(f"/v3/cloudcredentials/{credential}",
                                 {"s3credentialConfig": {"accessKey": None}})  # fmt: skip
    assert removed.body["credentialFields"] == ["secretKey"]
    assert secret_values(core, credential) == {"secretKey": SECRET_KEY}


async def test_the_driver_of_a_credential_cannot_change(user: Person) -> None:
    credential = (await create_s3(user))["id"]
    answer = await user.api.put(f"/v3/cloudcredentials/{credential}", {"kwokcredentialConfig": {}})
    error(answer, 422, "InvalidAction", "kwokcredentialConfig")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"name": "none"}, "MissingRequired", "credentialConfig"),
        ({"nonecredentialConfig": {}}, "InvalidReference", "nonecredentialConfig"),
        ({"s3credentialConfig": {"accessKey": "a"}}, "MissingRequired",
         "s3credentialConfig.secretKey"),
        ({"s3credentialConfig": {"region": "x"}}, "InvalidFormat", "s3credentialConfig.region"),
        ({"s3credentialConfig": []}, "InvalidFormat", "s3credentialConfig"),
        ({"type": "nodeTemplate", "s3credentialConfig": {}}, "InvalidFormat", "type"),
    ],
)  # fmt: skip
async def test_a_bad_credential_is_422_naming_the_field(
    user: Person, body: dict[str, Any], code: str, field: str
) -> None:
    error(await user.api.post("/v3/cloudcredentials", body), 422, code, field)


async def test_deleting_a_credential_deletes_its_secret(
    user: Person, crs: k8s.CustomObjectsApi, core: k8s.CoreV1Api
) -> None:
    credential = (await create_s3(user))["id"]
    assert (await user.api.delete(f"/v3/cloudcredentials/{credential}")).status == 204
    for read in (
        lambda: crs.get_cluster_custom_object(GROUP, VERSION, "cloudcredentials", credential),
        lambda: core.read_namespaced_secret(f"{credential}-secret", names.SYSTEM_NAMESPACE),
    ):
        with pytest.raises(k8s.ApiException) as raised:
            read()
        assert raised.value.status == 404
    error(await user.api.get(f"/v3/cloudcredentials/{credential}"), 404, "NotFound")


async def test_an_unknown_credential_is_404(admin: Person) -> None:
    error(await admin.api.get("/v3/cloudcredentials/cc-none"), 404, "NotFound")
