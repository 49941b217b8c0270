"""`/v3/nodedrivers`: everyone reads the drivers; administrators create, change, (de)activate
and delete them. What a driver is doing (downloaded, asked for its schema) is the operator's;
none runs here, so a new driver stays `activating`."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
URL = "https://drivers.example/corral-driver-{name}-v1.tar.gz"


async def create(admin: Person, **fields: Any) -> dict[str, Any]:
    name = f"d{secrets.token_hex(4)}"
    body = {"name": name, "url": URL.format(name=name), "active": True, **fields}
    made = await admin.api.post("/v3/nodedrivers", body)
    assert made.status == 201, made.body
    return dict(made.body)


async def test_the_builtin_driver_is_listed_and_ready_for_everyone(user: Person) -> None:
    listed = await user.api.get("/v3/nodedrivers")
    assert listed.status == 200
    assert listed.body["createTypes"] == {}
    kwok = next(d for d in listed.body["data"] if d["id"] == names.KWOK_DRIVER)
    assert kwok["builtin"] is True and kwok["active"] is True
    assert kwok["state"] == "active" and kwok["transitioning"] == "no"
    assert set(kwok["status"]["schema"]["fields"]) == {"cpu", "memory", "pods"}
    # A user who is no administrator gets no way to change it.
    assert kwok["actions"] == {}
    assert set(kwok["links"]) == {"self"}


async def test_an_admin_creates_a_driver_that_waits_for_the_operator(
    admin: Person, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(admin, displayName="Example", checksum="A" * 64)
    name = made["id"]
    assert made["type"] == "nodeDriver" and made["name"] == name
    assert made["builtin"] is False and made["checksum"] == "a" * 64
    assert made["state"] == "activating" and made["transitioning"] == "yes"
    assert made["actions"] == {"deactivate": f"{EXTERNAL_URL}/v3/nodeDrivers/{name}"
                                             "?action=deactivate"}  # fmt: skip
    assert made["links"]["update"] == made["links"]["remove"]
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "nodedrivers", name)
    assert stored["spec"] == {"builtin": False, "url": URL.format(name=name), "active": True,
                              "displayName": "Example", "checksum": "a" * 64}  # fmt: skip


async def test_a_name_is_derived_from_the_display_name_or_the_url(admin: Person) -> None:
    tail = secrets.token_hex(3)
    shown = await admin.api.post(
        "/v3/nodedrivers",
        {"displayName": f"My Cloud {tail}", "url": URL.format(name="x"), "active": False},
    )
    assert shown.status == 201 and shown.body["id"] == f"mycloud{tail}"
    from_url = await admin.api.post(
        "/v3/nodedrivers", {"url": URL.format(name=f"z{tail}"), "active": False}
    )
    assert from_url.status == 201 and from_url.body["id"] == f"z{tail}"
    assert from_url.body["state"] == "inactive"


async def test_a_taken_name_is_409(admin: Person) -> None:
    name = (await create(admin))["id"]
    again = await admin.api.post("/v3/nodedrivers", {"name": name, "url": URL.format(name=name),
                                                     "active": True})  # fmt: skip
    error(again, 409, "AlreadyExists")


async def test_actions_deactivate_and_activate(admin: Person) -> None:
    name = (await create(admin))["id"]
    off = await admin.api.post(f"/v3/nodedrivers/{name}?action=deactivate")
    assert off.status == 200 and off.body["active"] is False and off.body["state"] == "inactive"
    assert set(off.body["actions"]) == {"activate"}
    on = await admin.api.post(f"/v3/nodedrivers/{name}?action=activate")
    assert on.body["active"] is True
    error(await admin.api.post(f"/v3/nodedrivers/{name}?action=explode"), 422, "InvalidAction")
    error(await admin.api.post(f"/v3/nodedrivers/{name}"), 405, "MethodNotAllowed")


async def test_an_admin_updates_a_driver(admin: Person, crs: k8s.CustomObjectsApi) -> None:
    name = (await create(admin))["id"]
    changed = await admin.api.put(f"/v3/nodedrivers/{name}",
                                  {"description": "changed", "builtin": True})  # fmt: skip
    assert changed.status == 200 and changed.body["description"] == "changed"
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "nodedrivers", name)["spec"]
    assert stored["description"] == "changed" and stored["builtin"] is False


async def test_the_builtin_driver_keeps_its_url_and_stays(admin: Person) -> None:
    answer = await admin.api.put(f"/v3/nodedrivers/{names.KWOK_DRIVER}",
                                 {"url": "https://elsewhere.example/kwok"})  # fmt: skip
    error(answer, 422, "InvalidAction", "url")
    error(await admin.api.delete(f"/v3/nodedrivers/{names.KWOK_DRIVER}"), 405, "MethodNotAllowed")


async def test_a_plain_user_may_not_manage_drivers(user: Person, admin: Person) -> None:
    name = (await create(admin))["id"]
    body = {"name": "mine", "url": URL.format(name="mine"), "active": True}
    error(await user.api.post("/v3/nodedrivers", body), 403, "PermissionDenied")
    error(await user.api.put(f"/v3/nodedrivers/{name}", {"description": "x"}), 403,
          "PermissionDenied")  # fmt: skip
    error(await user.api.post(f"/v3/nodedrivers/{name}?action=deactivate"), 403,
          "PermissionDenied")  # fmt: skip
    error(await user.api.delete(f"/v3/nodedrivers/{name}"), 403, "PermissionDenied")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"name": "nourl", "active": True}, "MissingRequired", "url"),
        ({"name": "noactive", "url": URL.format(name="a")}, "MissingRequired", "active"),
        ({"name": "Bad-Name", "url": URL.format(name="a"), "active": True}, "InvalidFormat",
         "name"),
        ({"name": "ftp", "url": "ftp://host/driver", "active": True}, "InvalidFormat", "url"),
        ({"name": "sum", "url": URL.format(name="a"), "active": True, "checksum": "abc"},
         "InvalidFormat", "checksum"),
        ({"name": "file", "url": "file:///bin/sh", "active": True}, "InvalidFormat", "url"),
        ({"name": "mine", "url": URL.format(name="a"), "active": True, "builtin": True},
         "InvalidOption", "builtin"),
    ],
)  # fmt: skip
async def test_a_bad_driver_is_422_naming_the_field(
    admin: Person, body: dict[str, Any], code: str, field: str
) -> None:
    error(await admin.api.post("/v3/nodedrivers", body), 422, code, field)


async def test_deleting_a_driver_deletes_it(admin: Person, crs: k8s.CustomObjectsApi) -> None:
    name = (await create(admin))["id"]
    assert (await admin.api.delete(f"/v3/nodedrivers/{name}")).status == 204
    with pytest.raises(k8s.ApiException) as raised:
        crs.get_cluster_custom_object(GROUP, VERSION, "nodedrivers", name)
    assert raised.value.status == 404
    error(await admin.api.get(f"/v3/nodedrivers/{name}"), 404, "NotFound")
