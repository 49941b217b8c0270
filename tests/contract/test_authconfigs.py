"""`/v3/authConfigs` without a provider to reach: the four configurations, each one's fields
checked (another provider's field named, not dropped), GitHub enabled only by testAndApply,
the client secret kept in its Secret and never shown, and a plain user seeing nothing. The
sign-ins themselves run against Keycloak and the stand-in for GitHub (tests/e2e)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest
from kubernetes import client as k8s

from .client import error
from .conftest import EXTERNAL_URL, Person

GITHUB = "/v3/authConfigs/github"
SECRET = "s3cret-never-shown"


@pytest.fixture
async def github_reset(admin: Person) -> AsyncIterator[None]:
    yield
    reset = {"hostname": "github.com", "accessMode": "unrestricted", "allowedPrincipalIds": [],
             "certificate": "", "tls": True}  # fmt: skip
    assert (await admin.api.put(GITHUB, reset)).status == 200


async def test_every_provider_is_listed_to_admins_and_none_to_users(
    admin: Person, user: Person
) -> None:
    listed = await admin.api.get("/v3/authConfigs")
    assert [c["id"] for c in listed.body["data"]] == ["github", "keycloakoidc", "local", "oidc"]
    keycloak = (await admin.api.get("/v3/authConfigs/keycloakoidc")).body
    assert keycloak["redirectUri"] == (
        f"{EXTERNAL_URL}/v3-public/keycloakOIDCProviders/keycloakoidc/callback"
    )
    assert sorted(keycloak["actions"]) == ["configureTest", "disable", "testAndApply"]
    github = (await admin.api.get(GITHUB)).body
    assert (github["hostname"], github["accessMode"], github["enabled"]) == (
        "github.com", "unrestricted", False)  # fmt: skip
    assert github["redirectUri"] == f"{EXTERNAL_URL}/v3-public/githubProviders/github/callback"
    assert (await user.api.get("/v3/authConfigs")).body["data"] == []
    error(await user.api.get(GITHUB), 404, "NotFound")


async def test_github_fields_are_checked_and_the_secret_kept_apart(
    admin: Person, core: k8s.CoreV1Api, github_reset: None
) -> None:
    saved = await admin.api.put(GITHUB, {"clientId": "Iv1.abc", "clientSecret": SECRET,
                                         "hostname": "ghe.example.com"})  # fmt: skip
    assert saved.status == 200, saved.body
    assert (saved.body["clientId"], saved.body["hostname"]) == ("Iv1.abc", "ghe.example.com")
    assert SECRET not in json.dumps(saved.body) and "clientSecret" not in saved.body
    assert SECRET not in json.dumps((await admin.api.get("/v3/authConfigs")).body)
    kept = core.read_namespaced_secret("githubconfig-clientsecret", "svc-system")
    assert base64.b64decode(kept.data["clientSecret"]).decode() == SECRET

    for body, field in [
        ({"hostname": "https://ghe.example.com"}, "hostname"),
        ({"tls": False}, "tls"),
        ({"accessMode": "everyone"}, "accessMode"),
        ({"allowedPrincipalIds": ["github_user://alice"]}, "allowedPrincipalIds"),
        ({"certificate": "not PEM"}, "certificate"),
        ({"issuer": "https://id.example.com"}, "issuer"),
    ]:
        error(await admin.api.put(GITHUB, body), 422, "InvalidFormat", field)
    error(await admin.api.put(GITHUB, {"enabled": True}), 422, "InvalidAction", "enabled")
    error(await admin.api.put("/v3/authConfigs/oidc", {"hostname": "x"}), 422, "InvalidFormat",
          "hostname")  # fmt: skip
    assert (await admin.api.get(GITHUB)).body["hostname"] == "ghe.example.com"  # untouched


async def test_github_configure_test_names_the_authorize_page(
    admin: Person, github_reset: None
) -> None:
    before = (await admin.api.get(GITHUB)).body
    tried = {"clientId": "Iv1.abc", "hostname": "ghe.example.com"}
    tested = await admin.api.post(f"{GITHUB}?action=configureTest", tried)
    assert tested.status == 200, tested.body
    assert tested.body["type"] == "githubConfigTestOutput"
    assert tested.body["redirectUrl"].startswith(
        "https://ghe.example.com/login/oauth/authorize?client_id=Iv1.abc&redirect_uri="
    )
    assert (await admin.api.get(GITHUB)).body == before  # nothing saved
    missing = await admin.api.post(f"{GITHUB}?action=testAndApply", {"githubConfig": {}})
    error(missing, 422, "MissingRequired", "code")
    schemas = {s: (await admin.api.get(f"/v3/schemas/{s}")).status
               for s in ("githubConfigTestOutput", "githubConfigApplyInput")}  # fmt: skip
    assert schemas == {"githubConfigTestOutput": 200, "githubConfigApplyInput": 200}


@pytest.mark.parametrize(
    "query",
    ["returnTo=//evil.example/", "returnTo=https://evil.example/", "returnTo=%2F%5Cevil.example",
     "responseType=json&returnTo=/"],
)  # fmt: skip
async def test_a_sign_in_returns_only_to_a_path_on_corral(admin: Person, query: str) -> None:
    anonymous = admin.api.as_token(None)
    for login in ("/v3-public/oidcProviders/oidc/login",
                  "/v3-public/githubProviders/github/login"):  # fmt: skip
        refused = await anonymous.get(f"{login}?{query}")
        error(refused, 422, "InvalidFormat", "returnTo")
        assert "Location" not in refused.headers and "Set-Cookie" not in refused.headers
