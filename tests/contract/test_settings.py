"""`/v3/settings`: everyone reads them; administrators change them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes import client as k8s

from corral.core import settings
from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
# A setting nothing in this tier depends on.
NAME = "workload-max-scale"


@pytest.fixture
async def restored(admin: Person) -> AsyncIterator[str]:
    yield NAME
    assert (await admin.api.put(f"/v3/settings/{NAME}", {"value": ""})).status == 200


async def test_every_catalog_setting_is_listed_with_its_default(
    user: Person, admin: Person
) -> None:
    listed = await user.api.get("/v3/settings")
    assert listed.status == 200
    assert listed.body["resourceType"] == "setting" and listed.body["createTypes"] == {}
    by_id = {s["id"]: s for s in listed.body["data"]}
    assert set(settings.CATALOG) <= set(by_id)
    shown = by_id[NAME]
    definition = settings.CATALOG[NAME]
    assert shown["default"] == definition.default
    assert shown["description"] == definition.description
    # As in Rancher, only administrators, who may change it, are given its update link.
    url = f"{EXTERNAL_URL}/v3/settings/{NAME}"
    assert shown["links"] == {"self": url}
    assert (await admin.api.get(f"/v3/settings/{NAME}")).body["links"] == {
        "self": url,
        "update": url,
    }
    ids = [s["id"] for s in listed.body["data"]]
    assert ids == sorted(ids)


async def test_an_admin_changes_a_setting_and_resets_it(
    admin: Person, user: Person, crs: k8s.CustomObjectsApi, restored: str
) -> None:
    changed = await admin.api.put(f"/v3/settings/{restored}", {"value": "25"})
    assert changed.status == 200, changed.body
    assert changed.body["value"] == "25" and changed.body["customized"] is True
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "settings", restored)
    assert stored["value"] == "25"
    assert (await user.api.get(f"/v3/settings/{restored}")).body["value"] == "25"
    customized = await user.api.get("/v3/settings?customized=true")
    assert restored in {s["id"] for s in customized.body["data"]}

    reset = await admin.api.put(f"/v3/settings/{restored}", {"value": ""})
    assert reset.body["value"] == settings.CATALOG[restored].default
    assert reset.body["customized"] is False


async def test_a_plain_user_may_not_change_a_setting(user: Person) -> None:
    error(await user.api.put(f"/v3/settings/{NAME}", {"value": "5"}), 403, "PermissionDenied")


@pytest.mark.parametrize(
    ("body", "code"),
    [({}, "MissingRequired"), ({"value": None}, "MissingRequired"), ({"value": "many"},
                                                                      "InvalidFormat"),
     ({"value": "-1"}, "InvalidFormat"), ({"value": 5}, "InvalidFormat")],
)  # fmt: skip
async def test_a_bad_value_is_422_naming_value(
    admin: Person, body: dict[str, object], code: str
) -> None:
    error(await admin.api.put(f"/v3/settings/{NAME}", body), 422, code, "value")


async def test_an_unknown_setting_is_404(admin: Person) -> None:
    error(await admin.api.get("/v3/settings/no-such-setting"), 404, "NotFound")
    error(await admin.api.put("/v3/settings/no-such-setting", {"value": "1"}), 404, "NotFound")


async def test_settings_cannot_be_created_or_deleted(admin: Person) -> None:
    error(await admin.api.post("/v3/settings", {"name": "new", "value": "1"}), 405,
          "MethodNotAllowed")  # fmt: skip
    error(await admin.api.delete(f"/v3/settings/{NAME}"), 405, "MethodNotAllowed")
