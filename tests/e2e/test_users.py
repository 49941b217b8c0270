"""Users, global role bindings and settings through /v3, and the bootstrap administrator."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person

GROUP, VERSION = "management.svc.io", "v3"


def test_the_admin_is_bootstrapped_with_a_hashed_password_in_a_secret(
    stack: Environment, crs: k8s.CustomObjectsApi, management: k8s.ApiClient
) -> None:
    admin = crs.get_cluster_custom_object(GROUP, VERSION, "users", "u-admin")
    assert admin["spec"]["username"] == "admin"
    assert stack.admin_password not in str(admin)
    assert set(admin["spec"]) <= {"username", "displayName", "description", "enabled",
                                  "mustChangePassword"}  # fmt: skip
    binding = crs.get_cluster_custom_object(GROUP, VERSION, "globalrolebindings", "grb-admin")
    assert binding["spec"] == {"globalRoleName": "admin", "userName": "u-admin"}
    secret = k8s.CoreV1Api(management).read_namespaced_secret("u-admin-password", "svc-system")
    stored = base64.b64decode(secret.data["hash"]).decode()
    assert stored.startswith("$argon2id$") and stack.admin_password not in stored
    assert secret.metadata.owner_references[0].name == "u-admin"


def test_admin_creates_a_user_who_can_log_in_and_sees_only_themselves(
    api: Api, make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    user = api.get(f"/v3/users/{person.id}").body
    assert user["username"] == person.username and user["enabled"] is True
    assert user["principalIds"] == [f"local://{person.id}"]
    assert "password" not in user
    bindings = person.api.get("/v3/globalrolebindings").body["data"]
    assert [(b["globalRoleId"], b["userId"]) for b in bindings] == [("user", person.id)]

    mine = person.api.get("/v3/users").body["data"]
    assert [(u["id"], u["me"]) for u in mine] == [(person.id, True)]
    assert person.api.get("/v3/users/u-admin").status == 404  # invisible, not forbidden


def test_a_non_admin_cannot_manage_users_and_changes_nothing(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    before = len(crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"])
    created = person.api.post("/v3/users", {"username": "sneaky", "password": "long-enough-pw"})
    assert (created.status, created.body["code"]) == (403, "PermissionDenied")
    own = person.api.put(f"/v3/users/{person.id}", {"enabled": False})
    assert own.status == 403  # visible, not changeable
    grant = person.api.post(
        "/v3/globalrolebindings", {"globalRoleId": "admin", "userId": person.id}
    )
    assert grant.status == 403
    assert person.api.put("/v3/settings/auth-token-max-ttl-minutes", {"value": "1"}).status == 403
    assert len(crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"]) == before


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"password": "long-enough-password"}, "username", "MissingRequired"),
        ({"username": "short-pw"}, "password", "MissingRequired"),
        ({"username": "short-pw", "password": "tooshort"}, "password", "InvalidBodyContent"),
        ({"username": "same-as-user-1", "password": "same-as-user-1"}, "password",
         "InvalidBodyContent"),
        ({"username": "x", "password": "long-enough-password", "enabled": "yes"}, "enabled",
         "InvalidFormat"),
    ],
)  # fmt: skip
def test_invalid_users_are_refused_with_the_field_at_fault(
    api: Api, crs: k8s.CustomObjectsApi, body: dict, field: str, code: str
) -> None:
    before = len(crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"])
    response = api.post("/v3/users", body)
    assert (response.status, response.body["fieldName"], response.body["code"]) == (
        422, field, code,
    )  # fmt: skip
    assert len(crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"]) == before


def test_a_username_in_use_is_409_and_makes_no_user(api: Api, crs: k8s.CustomObjectsApi) -> None:
    before = len(crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"])
    response = api.post("/v3/users", {"username": "admin", "password": "long-enough-password"})
    assert (response.status, response.body["code"], response.body["fieldName"]) == (
        409, "AlreadyExists", "username",
    )  # fmt: skip
    assert response.body["message"] == "Username is already in use."
    assert len(crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"]) == before


def test_an_admin_can_grant_admin_and_the_grantee_then_manages_users(
    api: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user(admin=True)
    assert len(person.api.get("/v3/users").body["data"]) > 1
    created = person.api.post("/v3/users", {"username": f"by-{person.username}",
                                            "password": "long-enough-password"})  # fmt: skip
    assert created.status == 201
    assert person.api.get(f"/v3/users/{created.body['id']}").status == 200


def test_admins_cannot_delete_or_deactivate_themselves(api: Api) -> None:
    for response in (api.delete("/v3/users/u-admin"),
                     api.put("/v3/users/u-admin", {"enabled": False})):  # fmt: skip
        assert (response.status, response.body["code"]) == (422, "InvalidAction")


def test_disabling_a_user_stops_their_tokens_and_logins(
    api: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    assert api.put(f"/v3/users/{person.id}", {"enabled": False}).body["enabled"] is False
    assert person.api.get("/v3/tokens").status == 401
    assert api.login(person.username, person.password).status == 403
    api.put(f"/v3/users/{person.id}", {"enabled": True})
    assert person.api.get("/v3/tokens").status == 200


def test_setpassword_and_changepassword_end_other_sessions(
    api: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    api_token = person.api.as_token(person.api.post("/v3/token", {}).body["token"])
    reset = api.post(f"/v3/users/{person.id}?action=setpassword",
                     {"newPassword": "a-brand-new-password"})  # fmt: skip
    assert reset.status == 200
    assert person.api.get("/v3/tokens").status == 404  # the session ended
    assert api_token.get("/v3/tokens").status == 200  # API tokens are separate credentials
    assert api.login(person.username, person.password).status == 401
    session = api.login(person.username, "a-brand-new-password").body["token"]
    change = {"currentPassword": "a-brand-new-password", "newPassword": "yet-another-password"}
    changed = api.as_token(session).post("/v3/users?action=changepassword", change)
    assert changed.status == 200
    assert api.as_token(session).get("/v3/tokens").status == 200  # the caller's session stays
    change = {"currentPassword": "not-it-at-all", "newPassword": "whatever-password"}
    wrong = api.as_token(session).post("/v3/users?action=changepassword", change)
    assert (wrong.status, wrong.body["fieldName"]) == (422, "currentPassword")


def test_deleting_a_user_removes_their_bindings_and_password(
    api: Api, make_user: Callable[..., Person], crs: k8s.CustomObjectsApi,
    management: k8s.ApiClient,
) -> None:  # fmt: skip
    person = make_user(admin=True)
    assert api.delete(f"/v3/users/{person.id}").status == 204

    def gone() -> bool:
        bindings = crs.list_cluster_custom_object(GROUP, VERSION, "globalrolebindings")["items"]
        users = crs.list_cluster_custom_object(GROUP, VERSION, "users")["items"]
        secrets = k8s.CoreV1Api(management).list_namespaced_secret("svc-system").items
        return (
            all(b["spec"]["userName"] != person.id for b in bindings)
            and all(u["metadata"]["name"] != person.id for u in users)
            and all(s.metadata.name != f"{person.id}-password" for s in secrets)
        )

    wait_for("the user's bindings, object and password to go", gone, 60)


# -- settings -----------------------------------------------------------------------------


def test_settings_are_readable_by_all_and_validated(
    api: Api, make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    listed = {s["id"]: s for s in person.api.get("/v3/settings").body["data"]}
    assert listed["kubeconfig-default-token-ttl-minutes"]["default"] == "960"
    assert listed["auth-token-max-ttl-minutes"]["value"] == "0"
    bad = api.put("/v3/settings/auth-token-max-ttl-minutes", {"value": "forever"})
    assert (bad.status, bad.body["fieldName"]) == (422, "value")
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "settings", "auth-token-max-ttl-minutes")
    assert stored.get("value", "") in ("", "0")
    assert api.get("/v3/settings/no-such-setting").status == 404
    changed = api.put("/v3/settings/token-purge-interval-minutes", {"value": "30"})
    assert (changed.status, changed.body["value"], changed.body["customized"]) == (200, "30", True)
    assert api.put("/v3/settings/token-purge-interval-minutes", {"value": ""}).body["value"] == "60"


# -- envelope and schemas -----------------------------------------------------------------


def test_collections_filter_sort_and_page(api: Api, make_user: Callable[..., Person]) -> None:
    person = make_user()
    for description in ("b", "a", "c"):
        person.api.post("/v3/token", {"description": description})
    page = person.api.get("/v3/tokens?isDerived=true&sort=description&limit=2").body
    assert [t["description"] for t in page["data"]] == ["a", "b"]
    assert page["pagination"]["total"] == 3 and page["pagination"]["partial"] is True
    assert page["filters"]["isDerived"] == [{"modifier": "eq", "value": "true"}]
    rest = person.api.get(page["pagination"]["next"].split(api.base)[1]).body
    assert [t["description"] for t in rest["data"]] == ["c"]
    excluded = person.api.get("/v3/tokens?description_ne=a&description_in=a&description_in=b")
    assert [t["description"] for t in excluded.body["data"]] == ["b"]
    descending = person.api.get("/v3/tokens?isDerived=true&sort=description&order=desc").body
    assert [t["description"] for t in descending["data"]] == ["c", "b", "a"]


def test_schemas_describe_every_type(api: Api) -> None:
    schemas = {s["id"]: s for s in api.get("/v3/schemas").body["data"]}
    assert {"token", "user", "globalRoleBinding", "setting", "setPasswordInput"} <= set(schemas)
    token = schemas["token"]
    assert token["collectionMethods"] == ["GET", "POST"]
    assert token["resourceMethods"] == ["GET", "DELETE"]
    assert token["resourceFields"]["token"]["writeOnly"] is True
    assert token["resourceFields"]["description"]["create"] is True
    assert set(token["collectionActions"]) == {"logout", "logoutAll"}
    assert token["links"]["collection"].endswith("/v3/tokens")
    assert schemas["user"]["resourceActions"]["setpassword"]["input"] == "setPasswordInput"
    one = api.get("/v3/schemas/globalRoleBinding").body
    assert one["resourceFields"]["globalRoleId"]["options"] == ["admin", "user"]
    assert api.get("/v3/schemas/nope").status == 404


def test_type_names_match_in_any_case_and_unknown_paths_get_the_error_body(api: Api) -> None:
    assert api.get("/v3/globalRoleBindings").status == 200
    missing = api.get("/v3/nothing-here")
    assert missing.status == 404 and missing.body["type"] == "error"
    unsupported = api.put("/v3/tokens", {})
    assert unsupported.status == 405 and unsupported.body["code"] == "MethodNotAllowed"
