"""Sign-in through OpenID Connect against a real provider (Keycloak on loopback), driven as a
browser would: corral's login redirects to Keycloak, the test submits Keycloak's own login
form, Keycloak redirects back to corral's callback, which answers with the session.

Then what the sign-in gives: the user made once per subject, the provider Secret holding the
refresh token, groups recorded and counted by role bindings, the group sync refreshing them
(a rotated refresh token replacing the Secret's), a user dropped from a group losing the
project, and a deleted user's Secret gone. ID tokens that break a rule (issuer, audience,
expiry, `none`, a bad signature) are refused in tests/unit/test_oidc.py; here the refusals a
browser can cause: a forged state, a forged code, a configuration naming the wrong issuer.
"""

from __future__ import annotations

import base64
import html
import json
import re
import secrets
import ssl
import urllib.parse
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.keycloak import Keycloak
from corral.devenv.waiting import wait_for

from .api import Api
from .browser import Browser

REALM = "corral"
CLIENT_ID = "corral"
LOGIN = "/v3-public/oidcProviders/oidc/login"
CALLBACK = "/v3-public/oidcProviders/oidc/callback"
PASSWORDS = {"alice": secrets.token_urlsafe(12), "bob": secrets.token_urlsafe(12)}
# keycloakoidc: the same flow as oidc, its own provider id, against a realm of its own.
KC_REALM = "corral-kc"
KC_LOGIN = "/v3-public/keycloakOIDCProviders/keycloakoidc/login"
KC_CALLBACK = "/v3-public/keycloakOIDCProviders/keycloakoidc/callback"


@pytest.fixture(scope="module")
def oidc(api: Api, stack: Environment, keycloak: Keycloak) -> Iterator[str]:
    """corral configured for a realm of its own; the client secret, for tests that need it."""
    client_secret = secrets.token_urlsafe(24)
    keycloak.configure(REALM, CLIENT_ID, client_secret, stack.api_url + CALLBACK,
                       PASSWORDS, {"engineering": ["alice"]})  # fmt: skip
    config = {"issuer": keycloak.issuer(REALM), "clientId": CLIENT_ID,
              "clientSecret": client_secret, "groupsClaim": "groups"}  # fmt: skip
    applied = api.post("/v3/authConfigs/oidc?action=testAndApply",
                       {"oidcConfig": config, "enabled": True})  # fmt: skip
    assert applied.status == 200, applied.body
    yield client_secret
    assert api.post("/v3/authConfigs/oidc?action=disable", {}).status == 200


@pytest.fixture(scope="module")
def keycloakoidc(api: Api, stack: Environment, keycloak: Keycloak) -> Iterator[str]:
    """corral's keycloakoidc provider, configured beside oidc for a realm of its own."""
    client_secret = secrets.token_urlsafe(24)
    keycloak.configure(KC_REALM, CLIENT_ID, client_secret, stack.api_url + KC_CALLBACK,
                       PASSWORDS, {"engineering": ["alice"]})  # fmt: skip
    config = {"issuer": keycloak.issuer(KC_REALM), "clientId": CLIENT_ID,
              "clientSecret": client_secret}  # fmt: skip
    applied = api.post("/v3/authConfigs/keycloakoidc?action=testAndApply",
                       {"oidcConfig": config, "enabled": True})  # fmt: skip
    assert applied.status == 200, applied.body
    yield client_secret
    assert api.post("/v3/authConfigs/keycloakoidc?action=disable", {}).status == 200


def login_form(
    base: str, browser: Browser, username: str, response_type: str = "cookie",
    login: str = LOGIN, realm: str = REALM,
) -> tuple[str, dict[str, str]]:  # fmt: skip
    """corral's login, redirected to Keycloak's form: its action and what to fill in."""
    status, url, page = browser.open(f"{base}{login}?responseType={response_type}")
    assert status == 200 and f"/realms/{realm}/" in url, (status, url)
    action = re.search(rb'<form[^>]*id="kc-form-login"[^>]*action="([^"]+)"', page)
    assert action is not None, page[:500]
    form = {"username": username, "password": PASSWORDS[username], "credentialId": ""}
    return html.unescape(action.group(1).decode()), form


def sign_in(
    stack: Environment, browser: Browser, username: str, response_type: str = "cookie",
    login: str = LOGIN, realm: str = REALM,
) -> tuple[int, str, bytes]:  # fmt: skip
    """corral's login -> Keycloak's form, filled in and sent -> corral's callback."""
    return browser.open(*login_form(stack.api_url, browser, username, response_type, login,
                                    realm))  # fmt: skip


def session_api(stack: Environment, browser: Browser, corral_tls: ssl.SSLContext) -> Api:
    token = browser.cookie("R_SESS")
    assert token, "no session cookie"
    return Api(stack.api_url, corral_tls, token)


def provider_secret(management: k8s.ApiClient, user_id: str) -> dict[str, str] | None:
    try:
        secret = k8s.CoreV1Api(management).read_namespaced_secret(f"{user_id}-secret", "svc-system")
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    assert secret.type == "Opaque"
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def groups_of(crs: k8s.CustomObjectsApi, user_id: str, provider: str = "oidc") -> list[str] | None:
    try:
        found = crs.get_cluster_custom_object("management.svc.io", "v3", "userattributes", user_id)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return list((found.get("groupPrincipals") or {}).get(provider) or [])


def test_the_provider_is_listed_with_the_local_one(api: Api, oidc: str) -> None:
    listed = api.get("/v3-public/authProviders", auth=False)
    assert listed.status == 200
    by_id = {p["id"]: p for p in listed.body["data"]}
    assert by_id["local"]["type"] == "localProvider"
    assert by_id["oidc"]["type"] == "oidcProvider"
    assert by_id["oidc"]["redirectUrl"].endswith(LOGIN)
    config = api.get("/v3/authConfigs/oidc").body
    assert config["enabled"] is True and "clientSecret" not in config
    assert config["redirectUri"].endswith(CALLBACK)


def test_sign_in_through_keycloak_makes_a_session_as_local_login_does(
    stack: Environment,
    oidc: str,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
) -> None:
    browser = Browser(corral_tls)
    status, url, body = sign_in(stack, browser, "alice")
    assert (status, url.split("?")[0], body) == (200, stack.api_url + CALLBACK, b""), body
    assert browser.cookie("CSRF") and re.fullmatch(r"[0-9a-f]{32}", browser.cookie("CSRF") or "")
    me = session_api(stack, browser, corral_tls)
    tokens = me.get("/v3/tokens").body["data"]
    current = next(t for t in tokens if t["current"])
    assert (current["authProvider"], current["isDerived"]) == ("oidc", False)
    user = me.get(f"/v3/users/{current['userId']}").body
    assert user["principalIds"][0].startswith("oidc_user://") and user["name"] == "Alice Example"
    # The refresh token is in the provider Secret, never in a response.
    stored = provider_secret(management, user["id"])
    assert stored is not None and set(stored) == {"oidc"} and stored["oidc"]
    assert stored["oidc"] not in json.dumps(me.get(f"/v3/users/{user['id']}").body)
    assert groups_of(crs, user["id"]) == ["oidc_group://engineering"]
    # A cookie session must echo the CSRF cookie to change anything, as for local login.
    refused = me.post("/v3/tokens", {}, headers={"Cookie": f"R_SESS={me.token}"}, auth=False)
    assert refused.status == 422 and refused.body["code"] == "InvalidCSRFToken"

    again = Browser(corral_tls)
    status, _, body = sign_in(stack, again, "alice", response_type="json")
    assert status == 201, body
    assert json.loads(body)["token"].startswith(json.loads(body)["id"] + ":")
    second = Api(stack.api_url, corral_tls, json.loads(body)["token"])
    assert second.get("/v3/users?me=true").body["data"][0]["id"] == user["id"]  # one user


def test_a_cookie_sign_in_with_return_to_lands_on_that_page_signed_in(
    stack: Environment, oidc: str, corral_tls: ssl.SSLContext
) -> None:
    browser = Browser(corral_tls)
    action, form = login_form(stack.api_url, browser, "alice", "cookie&returnTo=/%23/x")
    callback = browser.redirect_of(action, form)
    assert callback.startswith(stack.api_url + CALLBACK), callback
    assert browser.redirect_of(callback) == "/#/x"
    me = session_api(stack, browser, corral_tls).get("/v3/users?me=true").body["data"][0]
    assert me["name"] == "Alice Example"


def test_a_group_binding_grants_a_project_until_the_provider_drops_the_group(
    api: Api,
    stack: Environment,
    keycloak: Keycloak,
    oidc: str,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    downstream: k8s.ApiClient,
    setting: Callable[[str, str], None],
) -> None:
    cluster = stack.cluster_ids[0]
    project = api.post("/v3/projects", {"name": f"p-{secrets.token_hex(3)}", "clusterId": cluster,
                                        "displayName": "oidc group"})  # fmt: skip
    assert project.status == 201, project.body
    pid = project.body["id"]
    bound = api.post("/v3/projectroletemplatebindings", {
        "projectId": pid, "groupPrincipalId": "oidc_group://engineering",
        "roleTemplateId": "project-member",
    })  # fmt: skip
    assert bound.status == 201, bound.body
    assert bound.body["groupPrincipalId"] == "oidc_group://engineering"
    both = api.post("/v3/projectroletemplatebindings", {
        "projectId": pid, "groupPrincipalId": "oidc_group://x", "userId": "u-admin",
        "roleTemplateId": "read-only",
    })  # fmt: skip
    assert both.status == 422 and "OR a group" in both.body["message"]

    alice_browser, bob_browser = Browser(corral_tls), Browser(corral_tls)
    assert sign_in(stack, alice_browser, "alice")[0] == 200
    assert sign_in(stack, bob_browser, "bob")[0] == 200
    alice = session_api(stack, alice_browser, corral_tls)
    bob = session_api(stack, bob_browser, corral_tls)
    assert alice.get(f"/v3/projects/{pid}").status == 200
    assert bob.get(f"/v3/projects/{pid}").status == 404
    namespace = f"ns-{secrets.token_hex(3)}"
    made = alice.post(f"/v3/clusters/{cluster}/namespaces",
                      {"name": namespace, "projectId": pid})  # fmt: skip
    assert made.status == 201, made.body

    # Downstream, the binding is a RoleBinding to the Group, which the proxy impersonates.
    rbac = k8s.RbacAuthorizationV1Api(downstream)

    def group_bound() -> bool:
        bindings = rbac.list_namespaced_role_binding(namespace).items
        return any(s.kind == "Group" and s.name == "oidc_group://engineering"
                   for b in bindings for s in b.subjects or [])  # fmt: skip

    wait_for("the group's RoleBinding downstream", group_bound, 60)
    user_id = alice.get("/v3/tokens").body["data"][0]["userId"]
    before = provider_secret(management, user_id)
    assert before is not None

    keycloak.leave_group(REALM, "alice", "engineering")
    setting("auth-group-sync-interval-minutes", "0.05")
    wait_for("alice's project gone after a group sync",
             lambda: alice.get(f"/v3/projects/{pid}").status == 404, 90)  # fmt: skip
    after = provider_secret(management, user_id)
    assert after is not None and after["oidc"] != before["oidc"]  # the refresh replaced it
    listed = alice.get(f"/v3/clusters/{cluster}/namespaces?projectId={pid}")
    assert listed.status == 404


def test_a_sign_in_begun_on_one_replica_finishes_on_another(
    stack: Environment, oidc: str, corral_tls: ssl.SSLContext, replica: Api
) -> None:
    """Nothing of a sign-in is in one replica's memory: the state is in the browser's sealed
    cookie, its key in a Secret every replica reads."""
    other = replica.base
    browser = Browser(corral_tls)
    back = urllib.parse.urlsplit(browser.redirect_of(*login_form(stack.api_url, browser, "bob")))
    assert back.path == CALLBACK
    status, _, body = browser.open(f"{other}{CALLBACK}?{back.query}")
    assert status == 200, body
    assert Api(other, corral_tls, browser.cookie("R_SESS")).get("/v3/tokens").status == 200


def test_a_forged_state_or_code_is_refused(
    stack: Environment, oidc: str, corral_tls: ssl.SSLContext
) -> None:
    browser = Browser(corral_tls)
    status, _, body = browser.open(f"{stack.api_url}{CALLBACK}?state=forged&code=abc")
    assert status == 401 and b"state" in body  # no cookie: not a sign-in this browser began
    status, url, _ = browser.open(f"{stack.api_url}{LOGIN}")
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["state"][0]
    status, _, body = browser.open(f"{stack.api_url}{CALLBACK}?state={state}&code=forged")
    assert status == 401 and b"invalid_grant" in body, body


def test_codes_refused_for_one_sign_in_are_throttled_before_reaching_the_provider(
    stack: Environment, oidc: str, corral_tls: ssl.SSLContext
) -> None:
    # Each code of a callback goes to the provider: a state replayed with guessed codes gets
    # the failed-login budget (5), then 429 with Retry-After, the provider no longer asked.
    browser = Browser(corral_tls)
    _, url, _ = browser.open(f"{stack.api_url}{LOGIN}")
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["state"][0]
    answers = []
    for guess in range(6):  # a refused callback leaves the state cookie where it is
        status, _, body = browser.open(f"{stack.api_url}{CALLBACK}?state={state}&code=g{guess}")
        answers.append((status, b"invalid_grant" in body))
    assert answers == [(401, True)] * 5 + [(429, False)], answers


def test_a_configuration_naming_another_issuer_is_refused(
    api: Api, keycloak: Keycloak, oidc: str
) -> None:
    wrong = keycloak.issuer(REALM) + "/"  # Keycloak names its issuer without the slash
    tried = api.post("/v3/authConfigs/oidc?action=configureTest", {"issuer": wrong})
    assert tried.status == 422 and tried.body["fieldName"] == "issuer", tried.body
    assert "not the configured" in tried.body["message"]
    good = api.post("/v3/authConfigs/oidc?action=configureTest", {})
    assert good.status == 200 and good.body["issuer"] == keycloak.issuer(REALM)
    assert api.get("/v3/authConfigs/oidc").body["issuer"] == keycloak.issuer(REALM)


def test_deleting_a_user_removes_their_provider_secret(
    api: Api,
    stack: Environment,
    oidc: str,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
) -> None:
    browser = Browser(corral_tls)
    assert sign_in(stack, browser, "bob")[0] == 200
    user_id = session_api(stack, browser, corral_tls).get("/v3/tokens").body["data"][0]["userId"]
    assert provider_secret(management, user_id) is not None
    assert api.delete(f"/v3/users/{user_id}").status == 204
    wait_for("the provider Secret gone",
             lambda: provider_secret(management, user_id) is None, 60)  # fmt: skip
    wait_for("the groups record gone", lambda: groups_of(crs, user_id) is None, 60)


def test_keycloakoidc_signs_in_beside_oidc_with_its_own_principals_and_secret_entry(
    api: Api,
    stack: Environment,
    oidc: str,
    keycloakoidc: str,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
) -> None:
    listed = {p["id"]: p for p in api.get("/v3-public/authProviders", auth=False).body["data"]}
    assert listed["oidc"]["type"] == "oidcProvider"
    assert listed["keycloakoidc"]["type"] == "keycloakOIDCProvider"
    assert listed["keycloakoidc"]["redirectUrl"].endswith(KC_LOGIN)
    config = api.get("/v3/authConfigs/keycloakoidc").body
    assert config["redirectUri"].endswith(KC_CALLBACK) and "clientSecret" not in config
    assert keycloakoidc not in json.dumps(api.get("/v3/authConfigs").body)

    browser = Browser(corral_tls)
    status, url, body = sign_in(stack, browser, "alice", login=KC_LOGIN, realm=KC_REALM)
    assert (status, url.split("?")[0]) == (200, stack.api_url + KC_CALLBACK), body
    me = session_api(stack, browser, corral_tls)
    current = next(t for t in me.get("/v3/tokens").body["data"] if t["current"])
    assert current["authProvider"] == "keycloakoidc"
    user = me.get(f"/v3/users/{current['userId']}").body
    assert user["principalIds"][0].startswith("keycloakoidc_user://")
    assert groups_of(crs, user["id"], "keycloakoidc") == ["keycloakoidc_group://engineering"]
    stored = provider_secret(management, user["id"])
    assert stored is not None and set(stored) == {"keycloakoidc"} and stored["keycloakoidc"]

    # The same person through oidc is another principal, so another user, with its own entry.
    other = Browser(corral_tls)
    assert sign_in(stack, other, "alice")[0] == 200
    through_oidc = session_api(stack, other, corral_tls).get("/v3/users?me=true").body["data"][0]
    assert through_oidc["id"] != user["id"]
    assert set(provider_secret(management, through_oidc["id"]) or {}) == {"oidc"}


def test_a_keycloakoidc_group_binding_lasts_until_group_sync_says_otherwise(
    api: Api,
    stack: Environment,
    keycloak: Keycloak,
    keycloakoidc: str,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
    setting: Callable[[str, str], None],
) -> None:
    project = api.post("/v3/projects", {"name": f"p-{secrets.token_hex(3)}",
                                        "clusterId": stack.cluster_ids[0],
                                        "displayName": "keycloakoidc group"})  # fmt: skip
    assert project.status == 201, project.body
    pid = project.body["id"]
    group = "keycloakoidc_group://engineering"
    binding = {"projectId": pid, "groupPrincipalId": group, "roleTemplateId": "project-member"}
    assert api.post("/v3/projectroletemplatebindings", binding).status == 201
    browser = Browser(corral_tls)
    assert sign_in(stack, browser, "alice", login=KC_LOGIN, realm=KC_REALM)[0] == 200
    alice = session_api(stack, browser, corral_tls)
    assert alice.get(f"/v3/projects/{pid}").status == 200
    user_id = alice.get("/v3/users?me=true").body["data"][0]["id"]
    before = (provider_secret(management, user_id) or {})["keycloakoidc"]

    keycloak.leave_group(KC_REALM, "alice", "engineering")
    setting("auth-group-sync-interval-minutes", "0.05")
    wait_for("alice's project gone after a group sync",
             lambda: alice.get(f"/v3/projects/{pid}").status == 404, 90)  # fmt: skip
    assert groups_of(crs, user_id, "keycloakoidc") == []
    after = provider_secret(management, user_id) or {}
    assert set(after) == {"keycloakoidc"} and after["keycloakoidc"] != before  # refreshed


def test_disabling_keycloakoidc_leaves_oidc_sessions_alone(
    api: Api, stack: Environment, oidc: str, keycloakoidc: str, corral_tls: ssl.SSLContext
) -> None:
    kc_browser, oidc_browser = Browser(corral_tls), Browser(corral_tls)
    assert sign_in(stack, kc_browser, "bob", login=KC_LOGIN, realm=KC_REALM)[0] == 200
    assert sign_in(stack, oidc_browser, "bob")[0] == 200
    assert api.post("/v3/authConfigs/keycloakoidc?action=disable", {}).status == 200
    refused = session_api(stack, kc_browser, corral_tls).get("/v3/tokens")
    assert refused.status == 401 and "provider disabled" in refused.body["message"]
    assert Browser(corral_tls).open(f"{stack.api_url}{KC_LOGIN}")[0] == 404
    assert session_api(stack, oidc_browser, corral_tls).get("/v3/tokens").status == 200
