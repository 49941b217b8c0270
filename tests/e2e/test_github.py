"""Sign-in through GitHub, against the local stand-in for GitHub (tools/devenv: GitHub itself
cannot be reached here; the stand-in serves the documented OAuth and REST endpoints the
provider uses, over HTTPS with a CA of its own, which corral is given in the configuration's
`certificate`). Driven as an administrator and a browser would, through HTTP only:

configured through /v3/authConfigs/github (configureTest's authorize page gives the code
testAndApply exchanges), signed in through corral's login redirect, the stand-in's authorize
page and corral's callback; organisations and teams become group principals a role binding
can name; the access token kept in the provider Secret under `github` and read again by the
group sync, which carries a team change (and a revoked token) to the user; the client secret
never returned; a wrong code, a wrong CA and a disabled provider refused.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.github import GithubStandIn
from corral.devenv.waiting import wait_for

from .api import Api
from .browser import Browser

CLIENT_ID = "Iv1.corral0test"
CLIENT_SECRET = secrets.token_hex(20)
LOGIN = "/v3-public/githubProviders/github/login"
CALLBACK = "/v3-public/githubProviders/github/callback"
CONFIG = "/v3/authConfigs/github"


@dataclass(frozen=True)
class Org:
    """The ids of the stand-in's organisation, team and users the tests use."""

    acme: int
    platform: int
    alice: int
    bob: int


@pytest.fixture(scope="module")
def github(stack: Environment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GithubStandIn]:
    stand_in = GithubStandIn(tmp_path_factory.mktemp("github"), CLIENT_ID, CLIENT_SECRET,
                             stack.api_url + CALLBACK).start()  # fmt: skip
    try:
        yield stand_in
    finally:
        stand_in.stop()


@pytest.fixture(scope="module")
def org(github: GithubStandIn) -> Org:
    acme = github.add_org("acme")
    platform = github.add_team(acme, "platform")
    alice = github.add_user("alice", "Alice Example", [acme], [platform])
    bob = github.add_user("bob", "Bob Example", [acme])
    github.add_user("carol", "Carol Example")
    return Org(acme, platform, alice, bob)


@pytest.fixture(scope="module")
def trust(stack: Environment, github: GithubStandIn) -> ssl.SSLContext:
    """What a browser trusts: corral's CA and the stand-in's (as a browser trusts GitHub's)."""
    context = ssl.create_default_context(cafile=str(stack.ca_path))
    context.load_verify_locations(cadata=github.ca_pem)
    return context


def config_of(github: GithubStandIn, **extra: Any) -> dict[str, Any]:
    return {"hostname": github.hostname, "tls": True, "clientId": CLIENT_ID,
            "clientSecret": CLIENT_SECRET, "certificate": github.ca_pem, **extra}  # fmt: skip


def code_from(api: Api, github: GithubStandIn, trust: ssl.SSLContext, login: str,
              config: dict[str, Any]) -> str:  # fmt: skip
    """An administrator's configureTest, and the code the authorize page it names gives."""
    tested = api.post(f"{CONFIG}?action=configureTest", config)
    assert tested.status == 200, tested.body
    assert tested.body["type"] == "githubConfigTestOutput"
    browser = Browser(trust)
    assert browser.open(f"{github.url}/stand-in/session?login={login}")[0] == 200
    back = urllib.parse.urlsplit(browser.redirect_of(tested.body["redirectUrl"]))
    assert back.path == CALLBACK, back
    return urllib.parse.parse_qs(back.query)["code"][0]


@pytest.fixture(scope="module")
def configured(api: Api, github: GithubStandIn, org: Org,
               trust: ssl.SSLContext) -> Iterator[None]:  # fmt: skip
    config = config_of(github)
    code = code_from(api, github, trust, "alice", config)
    applied = api.post(f"{CONFIG}?action=testAndApply",
                       {"githubConfig": config, "code": code, "enabled": True})  # fmt: skip
    assert applied.status == 200, applied.body
    assert applied.body["enabled"] is True and CLIENT_SECRET not in json.dumps(applied.body)
    yield
    assert api.post(f"{CONFIG}?action=disable", {}).status == 200


def sign_in(stack: Environment, github: GithubStandIn, trust: ssl.SSLContext, login: str,
            response_type: str = "cookie") -> tuple[Browser, int, bytes]:  # fmt: skip
    """Signed in at the stand-in, then corral's login -> its authorize page -> the callback."""
    browser = Browser(trust)
    assert browser.open(f"{github.url}/stand-in/session?login={login}")[0] == 200
    status, url, body = browser.open(f"{stack.api_url}{LOGIN}?responseType={response_type}")
    assert url.split("?")[0] == stack.api_url + CALLBACK, url
    return browser, status, body


def session_of(stack: Environment, browser: Browser, corral_tls: ssl.SSLContext) -> Api:
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
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


def groups_of(crs: k8s.CustomObjectsApi, user_id: str) -> list[str]:
    found = crs.get_cluster_custom_object("management.svc.io", "v3", "userattributes", user_id)
    return list((found.get("groupPrincipals") or {}).get("github") or [])


def github_user(github: GithubStandIn, trust: ssl.SSLContext, token: str) -> int:
    """Who the stand-in says a token is: the Secret holds a token GitHub issued."""
    request = urllib.request.Request(f"{github.url}/api/v3/user",
                                     headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30, context=trust) as answer:
        return int(json.loads(answer.read())["id"])


def test_the_provider_is_configured_listed_and_its_secret_never_shown(
    api: Api, github: GithubStandIn, configured: None, management: k8s.ApiClient
) -> None:
    listed = {p["id"]: p for p in api.get("/v3-public/authProviders", auth=False).body["data"]}
    assert listed["github"]["type"] == "githubProvider"
    assert listed["github"]["redirectUrl"].endswith(LOGIN)
    config = api.get(CONFIG)
    assert config.status == 200
    assert {k: config.body[k] for k in ("enabled", "hostname", "clientId", "accessMode", "tls")} \
        == {"enabled": True, "hostname": github.hostname, "clientId": CLIENT_ID,
            "accessMode": "unrestricted", "tls": True}  # fmt: skip
    assert config.body["redirectUri"].endswith(CALLBACK)
    everything = [config.body, api.get("/v3/authConfigs").body,
                  api.put(CONFIG, {"clientId": CLIENT_ID}).body]  # fmt: skip
    assert all("clientSecret" not in json.dumps(b) and CLIENT_SECRET not in json.dumps(b)
               for b in everything)  # fmt: skip
    kept = k8s.CoreV1Api(management).read_namespaced_secret(
        "githubconfig-clientsecret", "svc-system"
    )
    assert base64.b64decode(kept.data["clientSecret"]).decode() == CLIENT_SECRET
    # A field of another provider is named, not dropped.
    foreign = api.put(CONFIG, {"issuer": "https://example.com"})
    assert foreign.status == 422 and foreign.body["fieldName"] == "issuer", foreign.body
    # How an enabled provider is reached changes only by testAndApply, which tries it.
    moved = api.put(CONFIG, {"hostname": "github.com"})
    assert moved.status == 422 and moved.body["fieldName"] == "hostname", moved.body
    rotated = api.put(CONFIG, {"clientSecret": "another"})
    assert rotated.status == 422 and rotated.body["fieldName"] == "clientSecret", rotated.body
    assert api.get(CONFIG).body == config.body


def test_sign_in_makes_a_user_whose_groups_are_orgs_and_teams(
    stack: Environment,
    github: GithubStandIn,
    org: Org,
    configured: None,
    trust: ssl.SSLContext,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
) -> None:
    browser, status, body = sign_in(stack, github, trust, "alice")
    assert status == 200 and body == b"", body
    me = session_of(stack, browser, corral_tls)
    current = next(t for t in me.get("/v3/tokens").body["data"] if t["current"])
    assert (current["authProvider"], current["isDerived"]) == ("github", False)
    user = me.get(f"/v3/users/{current['userId']}").body
    assert user["principalIds"] == [f"github_user://{org.alice}"]
    assert user["name"] == "Alice Example"
    assert groups_of(crs, user["id"]) == sorted([f"github_org://{org.acme}",
                                                f"github_team://{org.platform}"])  # fmt: skip
    stored = provider_secret(management, user["id"])
    assert stored is not None and set(stored) == {"github"}
    assert github_user(github, trust, stored["github"]) == org.alice
    assert stored["github"] not in json.dumps(user)

    _, status, body = sign_in(stack, github, trust, "alice", response_type="json")
    assert status == 201, body
    again = Api(stack.api_url, corral_tls, json.loads(body)["token"])
    assert again.get("/v3/users?me=true").body["data"][0]["id"] == user["id"]  # one user


def test_a_team_binding_lasts_until_the_team_change_reaches_corral_by_group_sync(
    api: Api,
    stack: Environment,
    github: GithubStandIn,
    org: Org,
    configured: None,
    trust: ssl.SSLContext,
    corral_tls: ssl.SSLContext,
    management: k8s.ApiClient,
    crs: k8s.CustomObjectsApi,
    setting: Callable[[str, str], None],
) -> None:
    project = api.post("/v3/projects", {"name": f"p-{secrets.token_hex(3)}",
                                        "clusterId": stack.cluster_ids[0],
                                        "displayName": "github team"})  # fmt: skip
    assert project.status == 201, project.body
    pid = project.body["id"]
    team = f"github_team://{org.platform}"
    binding = {"projectId": pid, "groupPrincipalId": team, "roleTemplateId": "project-member"}
    bound = api.post("/v3/projectroletemplatebindings", binding)
    assert bound.status == 201 and bound.body["groupPrincipalId"] == team, bound.body

    alice_browser, status, _ = sign_in(stack, github, trust, "alice")
    assert status == 200
    bob_browser, status, _ = sign_in(stack, github, trust, "bob")
    assert status == 200
    alice = session_of(stack, alice_browser, corral_tls)
    bob = session_of(stack, bob_browser, corral_tls)
    assert alice.get(f"/v3/projects/{pid}").status == 200
    assert bob.get(f"/v3/projects/{pid}").status == 404
    alice_id = alice.get("/v3/users?me=true").body["data"][0]["id"]
    bob_id = bob.get("/v3/users?me=true").body["data"][0]["id"]
    token = (provider_secret(management, alice_id) or {})["github"]

    github.leave_team("alice", org.platform)
    github.revoke("bob")
    setting("auth-group-sync-interval-minutes", "0.05")
    wait_for("alice's project gone after a group sync",
             lambda: alice.get(f"/v3/projects/{pid}").status == 404, 90)  # fmt: skip
    assert groups_of(crs, alice_id) == [f"github_org://{org.acme}"]
    assert provider_secret(management, alice_id) == {"github": token}  # read again, kept
    # GitHub refuses bob's revoked token: his groups are cleared and the dead token removed.
    wait_for("bob's groups cleared", lambda: groups_of(crs, bob_id) == [], 60)
    # Cleared first, so that he loses what they gave him at once; the token goes next.
    wait_for("bob's dead token removed", lambda: provider_secret(management, bob_id) == {}, 60)


def test_a_wrong_code_or_a_wrong_ca_is_refused(
    api: Api,
    stack: Environment,
    github: GithubStandIn,
    configured: None,
    trust: ssl.SSLContext,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    browser = Browser(trust)
    state = urllib.parse.parse_qs(
        urllib.parse.urlsplit(browser.redirect_of(f"{stack.api_url}{LOGIN}")).query
    )["state"][0]
    status, _, body = browser.open(f"{stack.api_url}{CALLBACK}?state={state}&code=forged")
    assert status == 401, body
    assert json.loads(body)["code"] == "Unauthorized" and b"bad_verification_code" in body
    status, _, body = Browser(trust).open(f"{stack.api_url}{CALLBACK}?state={state}&code=x")
    assert status == 401 and b"state" in body  # not this browser's sign-in

    before = api.get(CONFIG).body
    wrong = api.post(f"{CONFIG}?action=testAndApply", {
        "githubConfig": config_of(github, clientId="Iv1.other"), "code": "forged",
        "enabled": True})  # fmt: skip
    assert wrong.status == 422 and wrong.body["fieldName"] == "clientSecret", wrong.body
    other = GithubStandIn(tmp_path_factory.mktemp("other"), CLIENT_ID, CLIENT_SECRET,
                          stack.api_url + CALLBACK)  # fmt: skip
    code = code_from(api, github, trust, "carol", config_of(github))
    untrusted = api.post(f"{CONFIG}?action=testAndApply", {
        "githubConfig": config_of(github, certificate=other.ca_pem), "code": code,
        "enabled": True})  # fmt: skip
    assert untrusted.status == 422 and untrusted.body["fieldName"] == "hostname", untrusted.body
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.body["message"]
    code = code_from(api, github, trust, "carol", config_of(github))
    refused = api.post(f"{CONFIG}?action=testAndApply", {
        "githubConfig": config_of(github), "code": code + "x", "enabled": True})  # fmt: skip
    assert refused.status == 422 and refused.body["fieldName"] == "code", refused.body
    assert api.get(CONFIG).body == before  # nothing saved


def test_the_access_mode_keeps_out_who_is_not_allowed(
    api: Api,
    stack: Environment,
    github: GithubStandIn,
    org: Org,
    configured: None,
    trust: ssl.SSLContext,
) -> None:
    required = api.put(CONFIG, {"accessMode": "required",
                                "allowedPrincipalIds": [f"github_org://{org.acme}"]})  # fmt: skip
    assert required.status == 200, required.body
    try:
        _, status, body = sign_in(stack, github, trust, "carol")
        assert status == 403, body
        assert sign_in(stack, github, trust, "bob")[1] == 200  # a member of acme
        bad = api.put(CONFIG, {"allowedPrincipalIds": ["someone"]})
        assert bad.status == 422 and bad.body["fieldName"] == "allowedPrincipalIds"
    finally:
        assert api.put(CONFIG, {"accessMode": "unrestricted", "allowedPrincipalIds": []}).status \
            == 200  # fmt: skip
    assert sign_in(stack, github, trust, "carol")[1] == 200


def test_a_disabled_provider_refuses_sign_in_and_its_tokens(
    api: Api,
    stack: Environment,
    github: GithubStandIn,
    configured: None,
    trust: ssl.SSLContext,
    corral_tls: ssl.SSLContext,
) -> None:
    browser, status, _ = sign_in(stack, github, trust, "alice")
    assert status == 200
    session = session_of(stack, browser, corral_tls)
    assert api.post(f"{CONFIG}?action=disable", {}).status == 200
    try:
        assert Browser(trust).open(f"{stack.api_url}{LOGIN}")[0] == 404
        refused = session.get("/v3/tokens")
        assert refused.status == 401 and "provider disabled" in refused.body["message"]
        assert "github" not in {p["id"] for p in api.get("/v3-public/authProviders").body["data"]}
        # Enabling again takes a code: a PUT cannot turn it on untried.
        assert api.put(CONFIG, {"enabled": True}).status == 422
    finally:
        code = code_from(api, github, trust, "alice", config_of(github))
        body = {"githubConfig": config_of(github), "code": code, "enabled": True}
        again = api.post(f"{CONFIG}?action=testAndApply", body)
        assert again.status == 200, again.body
    assert session.get("/v3/tokens").status == 200
