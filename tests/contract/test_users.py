"""`/v3/users`: administrators manage every user; a user sees only themselves."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import Api, error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
PASSWORD = "a long enough password"


def new_username() -> str:
    return f"made-{secrets.token_hex(4)}"


async def create(api: Api, **fields: Any) -> dict[str, Any]:
    made = await api.post("/v3/users", {"username": new_username(), "password": PASSWORD,
                                        **fields})  # fmt: skip
    assert made.status == 201, made.body
    return dict(made.body)


async def test_an_admin_creates_a_user_who_can_log_in(
    admin: Person, anonymous: Api, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(admin.api, name="Ada", description="first")
    user_id = made["id"]
    assert user_id.startswith("u-") and made["type"] == "user"
    assert made["name"] == "Ada" and made["description"] == "first"
    assert made["enabled"] is True and made["mustChangePassword"] is False
    assert made["principalIds"] == [f"local://{user_id}"] and made["me"] is False
    assert "password" not in made
    assert made["actions"] == {"setpassword": f"{EXTERNAL_URL}/v3/users/{user_id}"
                                              "?action=setpassword"}  # fmt: skip
    assert made["links"]["update"] == made["links"]["remove"] == made["links"]["self"]

    stored = crs.get_cluster_custom_object(GROUP, VERSION, "users", user_id)
    assert stored["spec"]["username"] == made["username"]
    assert PASSWORD not in str(stored)
    login = await anonymous.post("/v3-public/localProviders/local?action=login",
                                 {"username": made["username"], "password": PASSWORD})  # fmt: skip
    assert login.status == 201, login.body
    session = anonymous.as_token(login.body["token"])
    assert (await session.get(f"/v3/users/{user_id}")).body["me"] is True


async def test_a_user_sees_only_themselves(admin: Person, user: Person) -> None:
    listed = await user.api.get("/v3/users")
    assert listed.status == 200
    assert [u["id"] for u in listed.body["data"]] == [user.id]
    assert listed.body["data"][0]["me"] is True
    assert listed.body["data"][0]["actions"] == {}
    assert listed.body["createTypes"] == {}
    error(await user.api.get(f"/v3/users/{admin.id}"), 404, "NotFound")
    assert (await user.api.get(f"/v3/users/{user.id}")).body["username"] == user.username
    everyone = await admin.api.get("/v3/users")
    assert {admin.id, user.id} <= {u["id"] for u in everyone.body["data"]}
    assert everyone.body["createTypes"] == {"user": f"{EXTERNAL_URL}/v3/users"}


async def test_a_plain_user_may_not_manage_users(user: Person, admin: Person) -> None:
    body = {"username": new_username(), "password": PASSWORD}
    error(await user.api.post("/v3/users", body), 403, "PermissionDenied")
    error(await user.api.put(f"/v3/users/{user.id}", {"name": "me"}), 403, "PermissionDenied")
    error(await user.api.delete(f"/v3/users/{user.id}"), 403, "PermissionDenied")
    # Another user's id is answered as one that does not exist.
    error(await user.api.put(f"/v3/users/{admin.id}", {"name": "x"}), 404, "NotFound")


async def test_a_taken_username_is_409(admin: Person, user: Person) -> None:
    body = {"username": user.username, "password": PASSWORD}
    error(await admin.api.post("/v3/users", body), 409, "AlreadyExists", "username")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"password": PASSWORD}, "MissingRequired", "username"),
        ({"username": "someone-new"}, "MissingRequired", "password"),
        ({"username": "someone-new", "password": "short"}, "InvalidBodyContent", "password"),
        ({"username": "x" * 64, "password": PASSWORD}, "InvalidFormat", "username"),
        ({"username": "someone-new", "password": PASSWORD, "enabled": "yes"}, "InvalidFormat",
         "enabled"),
    ],
)  # fmt: skip
async def test_a_bad_user_is_422_naming_the_field(
    admin: Person, body: dict[str, Any], code: str, field: str
) -> None:
    error(await admin.api.post("/v3/users", body), 422, code, field)


async def test_an_admin_updates_a_user(admin: Person, crs: k8s.CustomObjectsApi) -> None:
    user_id = (await create(admin.api))["id"]
    changed = await admin.api.put(
        f"/v3/users/{user_id}", {"name": "Renamed", "enabled": False, "username": "ignored"}
    )
    assert changed.status == 200, changed.body
    assert changed.body["name"] == "Renamed" and changed.body["enabled"] is False
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "users", user_id)["spec"]
    assert stored["displayName"] == "Renamed" and stored["enabled"] is False
    assert stored["username"] != "ignored"  # not a field an update may set


async def test_an_admin_cannot_disable_or_delete_themselves(admin: Person) -> None:
    error(await admin.api.put(f"/v3/users/{admin.id}", {"enabled": False}), 422, "InvalidAction")
    error(await admin.api.delete(f"/v3/users/{admin.id}"), 422, "InvalidAction")


async def test_deleting_a_user_ends_their_sessions_at_once(
    admin: Person, anonymous: Api, crs: k8s.CustomObjectsApi
) -> None:
    made = await create(admin.api)
    user_id = made["id"]
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "users", user_id)
    # The operator's finalizer from the start: its deletion handler (which deletes the user's
    # tokens and grants) runs even for a user deleted before it first saw them.
    assert stored["metadata"]["finalizers"] == [names.FINALIZER_OPERATOR]
    login = await anonymous.post("/v3-public/localProviders/local?action=login",
                                 {"username": made["username"], "password": PASSWORD})  # fmt: skip
    session = anonymous.as_token(login.body["token"])
    assert (await session.get(f"/v3/users/{user_id}")).status == 200
    assert (await admin.api.delete(f"/v3/users/{user_id}")).status == 204
    # No operator runs in this tier: the user waits, marked, for its handler; their tokens
    # are refused (as a deleted user's are) from the moment of the delete, not from the
    # handler's.
    deleting = crs.get_cluster_custom_object(GROUP, VERSION, "users", user_id)
    assert deleting["metadata"]["deletionTimestamp"]
    refused = await session.get(f"/v3/users/{user_id}")
    assert (refused.status, refused.body["message"]) == (404, "token not found")


async def test_an_unknown_user_is_404(admin: Person) -> None:
    for method in ("GET", "PUT", "DELETE"):
        error(await admin.api.request(method, "/v3/users/u-nothere", {}), 404, "NotFound")


async def test_users_filter_by_field_and_modifiers(
    admin: Person, make_user: Callable[..., Awaitable[Person]]
) -> None:
    one, two = await make_user(), await make_user()
    exact = await admin.api.get(f"/v3/users?username={one.username}")
    assert [u["id"] for u in exact.body["data"]] == [one.id]
    assert exact.body["filters"]["username"] == [{"modifier": "eq", "value": one.username}]
    assert exact.body["filters"]["enabled"] is None
    either = await admin.api.get(f"/v3/users?id_in={one.id}&id_in={two.id}&sort=username")
    assert [u["id"] for u in either.body["data"]] == sorted(
        [one.id, two.id], key=lambda i: {one.id: one.username, two.id: two.username}[i]
    )
    others = await admin.api.get(f"/v3/users?id_notin={one.id}")
    assert one.id not in {u["id"] for u in others.body["data"]}
    assert two.id in {u["id"] for u in others.body["data"]}


async def test_setpassword_is_an_admins_action(admin: Person, user: Person) -> None:
    user_id = (await create(admin.api))["id"]
    action = f"/v3/users/{user_id}?action=setpassword"
    assert (await admin.api.post(action, {"newPassword": "another long password"})).status == 200
    error(await admin.api.post(action, {"newPassword": "short"}), 422, "InvalidBodyContent",
          "password")  # fmt: skip
    error(await admin.api.post(f"/v3/users/{user_id}?action=nothing"), 422, "InvalidAction")
    error(await admin.api.post(f"/v3/users/{user_id}"), 405, "MethodNotAllowed")
    own = f"/v3/users/{user.id}?action=setpassword"
    error(await user.api.post(own, {"newPassword": "another long password"}), 403,
          "PermissionDenied")  # fmt: skip


async def test_the_bootstrapped_admin_signs_in(anonymous: Api, admin_password: str) -> None:
    login = await anonymous.post("/v3-public/localProviders/local?action=login",
                                 {"username": "admin", "password": admin_password})  # fmt: skip
    assert login.status == 201, login.body
    assert login.body["type"] == "token" and login.body["token"].startswith(login.body["id"])
    me = await anonymous.as_token(login.body["token"]).get("/v3/users?me=true")
    assert [u["username"] for u in me.body["data"]] == ["admin"]
    wrong = await anonymous.post("/v3-public/localProviders/local?action=login",
                                 {"username": "admin", "password": "not it at all"})  # fmt: skip
    error(wrong, 401, "Unauthorized")
