"""`/v3/nodetemplates`: which machine a node pool makes, checked against the schema its driver
declared, owned by its creator. The builtin kwok driver is ready (the fixture wrote its
status as the operator would)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION


async def create(person: Person, **fields: Any) -> dict[str, Any]:
    made = await person.api.post(
        "/v3/nodetemplates", {"name": "small", "kwokConfig": {"cpu": "2"}, **fields}
    )
    assert made.status == 201, made.body
    return dict(made.body)


async def kwok_credential(person: Person) -> str:
    made = await person.api.post("/v3/cloudcredentials", {"kwokcredentialConfig": {}})
    assert made.status == 201, made.body
    return str(made.body["id"])


async def test_a_template_fills_its_drivers_defaults(
    user: Person, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(user, nodeTaints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    template = made["id"]
    assert template.startswith("nt-") and made["type"] == "nodeTemplate"
    assert made["driver"] == "kwok" and made["name"] == made["displayName"] == "small"
    assert made["kwokConfig"] == {"cpu": "2", "memory": "8Gi", "pods": 110}
    assert made["creatorId"] == user.id and made["state"] == "active"
    assert made["nodeTaints"] == [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    assert made["links"]["nodeDriver"] == f"{EXTERNAL_URL}/v3/nodedrivers/kwok"
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "nodetemplates", template)
    assert stored["spec"]["config"] == {"cpu": "2", "memory": "8Gi", "pods": 110}
    owners = stored["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"]) for o in owners] == [("User", user.id)]


async def test_another_users_template_is_404_and_unlisted(admin: Person, user: Person) -> None:
    theirs = (await create(admin))["id"]
    error(await user.api.get(f"/v3/nodetemplates/{theirs}"), 404, "NotFound")
    error(await user.api.put(f"/v3/nodetemplates/{theirs}", {"name": "x"}), 404, "NotFound")
    error(await user.api.delete(f"/v3/nodetemplates/{theirs}"), 404, "NotFound")
    listed = await user.api.get("/v3/nodetemplates")
    assert theirs not in {t["id"] for t in listed.body["data"]}
    assert (await admin.api.get(f"/v3/nodetemplates/{theirs}")).status == 200


async def test_an_update_replaces_the_config_whole(user: Person) -> None:
    template = (await create(user, kwokConfig={"cpu": "2", "memory": "4Gi"}))["id"]
    changed = await user.api.put(f"/v3/nodetemplates/{template}",
                                 {"description": "d", "kwokConfig": {"pods": 50}})  # fmt: skip
    assert changed.status == 200, changed.body
    assert changed.body["kwokConfig"] == {"cpu": "4", "memory": "8Gi", "pods": 50}
    assert changed.body["description"] == "d"
    error(await user.api.put(f"/v3/nodetemplates/{template}", {"driver": "other"}), 422,
          "InvalidAction", "driver")  # fmt: skip


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"name": "none"}, "MissingRequired", "driver"),
        ({"driver": "nothere"}, "InvalidReference", "driver"),
        ({"kwokConfig": {"cpu": "lots"}}, "InvalidFormat", "kwokConfig.cpu"),
        ({"kwokConfig": {"disk": "1"}}, "InvalidBodyContent", "kwokConfig.disk"),
        ({"driver": "kwok", "s3Config": {}}, "InvalidFormat", "s3Config"),
        ({"kwokConfig": {}, "cloudCredentialName": "cc-none"}, "InvalidReference",
         "cloudCredentialName"),
        ({"kwokConfig": {}, "nodeTaints": [{"key": "k"}]}, "InvalidFormat", "nodeTaints"),
    ],
)  # fmt: skip
async def test_a_bad_template_is_422_naming_the_field(
    user: Person, body: dict[str, Any], code: str, field: str
) -> None:
    error(await user.api.post("/v3/nodetemplates", body), 422, code, field)


async def test_a_template_names_only_its_owners_credential_of_its_driver(
    admin: Person, user: Person
) -> None:
    own = await kwok_credential(user)
    made = await create(user, cloudCredentialName=own)
    assert made["cloudCredentialName"] == own
    assert made["links"]["cloudCredential"] == f"{EXTERNAL_URL}/v3/cloudcredentials/{own}"
    theirs = await kwok_credential(admin)
    refused = await user.api.post(
        "/v3/nodetemplates", {"kwokConfig": {}, "cloudCredentialName": theirs}
    )
    error(refused, 422, "InvalidReference", "cloudCredentialName")
    s3 = await user.api.post(
        "/v3/cloudcredentials", {"s3credentialConfig": {"accessKey": "a", "secretKey": "b"}}
    )
    wrong = await user.api.post(
        "/v3/nodetemplates", {"kwokConfig": {}, "cloudCredentialName": s3.body["id"]}
    )
    error(wrong, 422, "InvalidReference", "cloudCredentialName")
    # A credential a template uses stays until the template goes.
    error(await user.api.delete(f"/v3/cloudcredentials/{own}"), 409, "Conflict")
    assert (await user.api.delete(f"/v3/nodetemplates/{made['id']}")).status == 204
    assert (await user.api.delete(f"/v3/cloudcredentials/{own}")).status == 204


async def test_a_driver_not_ready_takes_no_template(admin: Person, user: Person) -> None:
    driver = await admin.api.post(
        "/v3/nodedrivers", {"name": "notready", "active": True, "url": "https://drivers.example/d"}
    )
    assert driver.status == 201, driver.body
    answer = await user.api.post("/v3/nodetemplates", {"notreadyConfig": {}})
    error(answer, 422, "InvalidReference", "driver")


async def test_deleting_a_template_deletes_it(user: Person, crs: k8s.CustomObjectsApi) -> None:
    template = (await create(user))["id"]
    assert (await user.api.delete(f"/v3/nodetemplates/{template}")).status == 204
    with pytest.raises(k8s.ApiException) as raised:
        crs.get_cluster_custom_object(GROUP, VERSION, "nodetemplates", template)
    assert raised.value.status == 404
    error(await user.api.get(f"/v3/nodetemplates/{template}"), 404, "NotFound")
