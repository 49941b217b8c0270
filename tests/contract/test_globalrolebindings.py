"""`/v3/globalrolebindings`: who is an administrator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION


async def test_granting_admin_makes_an_administrator_and_revoking_ends_it(
    admin: Person, make_user: Callable[..., Awaitable[Person]], crs: k8s.CustomObjectsApi
) -> None:
    person = await make_user()
    error(await person.api.post("/v3/users", {}), 403, "PermissionDenied")
    granted = await admin.api.post("/v3/globalrolebindings",
                                   {"globalRoleId": "admin", "userId": person.id})  # fmt: skip
    assert granted.status == 201, granted.body
    binding = granted.body
    assert binding["id"].startswith("grb-") and binding["type"] == "globalRoleBinding"
    assert binding["globalRoleId"] == "admin" and binding["userId"] == person.id
    assert binding["links"] == {"self": f"{EXTERNAL_URL}/v3/globalRoleBindings/{binding['id']}",
                                "remove": f"{EXTERNAL_URL}/v3/globalRoleBindings/"
                                          f"{binding['id']}"}  # fmt: skip
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "globalrolebindings", binding["id"])
    assert stored["spec"] == {"globalRoleName": "admin", "userName": person.id}
    # The binding is the app's own write: the next request sees it.
    error(await person.api.post("/v3/users", {}), 422, "MissingRequired", "username")

    assert (await admin.api.delete(f"/v3/globalrolebindings/{binding['id']}")).status == 204
    error(await person.api.post("/v3/users", {}), 403, "PermissionDenied")
    error(await admin.api.get(f"/v3/globalrolebindings/{binding['id']}"), 404, "NotFound")


async def test_a_user_sees_only_their_own_bindings(admin: Person, user: Person) -> None:
    own = await user.api.get("/v3/globalrolebindings")
    assert own.status == 200
    assert {b["userId"] for b in own.body["data"]} == {user.id}
    assert [b["globalRoleId"] for b in own.body["data"]] == ["user"]
    assert own.body["createTypes"] == {}
    theirs = (await admin.api.get(f"/v3/globalrolebindings?userId={admin.id}")).body["data"]
    assert theirs and {b["userId"] for b in theirs} == {admin.id}
    error(await user.api.get(f"/v3/globalrolebindings/{theirs[0]['id']}"), 404, "NotFound")
    error(await user.api.delete(f"/v3/globalrolebindings/{theirs[0]['id']}"), 404, "NotFound")


async def test_a_plain_user_may_not_grant_or_revoke(user: Person) -> None:
    body = {"globalRoleId": "admin", "userId": user.id}
    error(await user.api.post("/v3/globalrolebindings", body), 403, "PermissionDenied")
    mine = (await user.api.get("/v3/globalrolebindings")).body["data"][0]["id"]
    error(await user.api.delete(f"/v3/globalrolebindings/{mine}"), 403, "PermissionDenied")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"globalRoleId": "root", "userId": "u-x"}, "InvalidOption", "globalRoleId"),
        ({"globalRoleId": "admin", "userId": "u-nothere"}, "InvalidReference", "userId"),
        ({"userId": "u-x"}, "MissingRequired", "globalRoleId"),
        ({"globalRoleId": "user"}, "MissingRequired", "userId"),
    ],
)
async def test_a_bad_binding_is_422_naming_the_field(
    admin: Person, body: dict[str, Any], code: str, field: str
) -> None:
    error(await admin.api.post("/v3/globalrolebindings", body), 422, code, field)


async def test_an_admin_cannot_revoke_their_own_admin_role(admin: Person) -> None:
    own = await admin.api.get(f"/v3/globalrolebindings?userId={admin.id}&globalRoleId=admin")
    (binding,) = own.body["data"]
    error(await admin.api.delete(f"/v3/globalrolebindings/{binding['id']}"), 422,
          "InvalidAction")  # fmt: skip


async def test_an_unknown_binding_is_404(admin: Person) -> None:
    error(await admin.api.get("/v3/globalrolebindings/grb-none"), 404, "NotFound")
    error(await admin.api.delete("/v3/globalrolebindings/grb-none"), 404, "NotFound")
