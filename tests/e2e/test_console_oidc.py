"""The console's sign-in through OpenID Connect and its sign-in providers page, in Debian's
Chromium against the stack `make run` starts and a real Keycloak on loopback (its own module,
since test_console.py's tests need none; Keycloak, which takes a while to start, is shared
with test_oidc.py on one worker, each module in realms of its own).

An administrator configures and enables a provider from the page (a refusal shown at its
field, nothing saved; the client secret never shown back), a Keycloak user signs in with the
provider's button on the sign-in page by Keycloak's own login form, acts as themselves (what a
group binding gives them, a project they create is theirs) and signs out.
"""

from __future__ import annotations

import re
import secrets
import ssl
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from corral.devenv.environment import Environment
from corral.devenv.keycloak import Keycloak

from . import test_console as console
from .api import Api
from .conftest import Person
from .test_console import (
    CHROMIUM,
    SCREENSHOTS,
    axe_violations,
    field_error,
    in_theme,
    row,
    session_token,
    sign_in,
    visit,
)

# The console tests' browser fixtures, shared rather than copied: pytest finds a module's
# fixtures among its names.
playwright, browser = console.playwright, console.browser
context, page = console.context, console.page

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="make browser-deps installs it")

CLIENT_ID = "corral"
PASSWORDS = {"alice": secrets.token_urlsafe(12)}
# `oidc` is enabled through the API for the sign-in; `keycloakoidc` is configured from the page.
# Realms of this module's own: Keycloak is shared with test_oidc.
REALM, CALLBACK = "console", "/v3-public/oidcProviders/oidc/callback"
KC_REALM, KC_CALLBACK = "console-kc", "/v3-public/keycloakOIDCProviders/keycloakoidc/callback"


@pytest.fixture(scope="module")
def oidc(api: Api, stack: Environment, keycloak: Keycloak) -> Iterator[None]:
    client_secret = secrets.token_urlsafe(24)
    keycloak.configure(REALM, CLIENT_ID, client_secret, stack.api_url + CALLBACK, PASSWORDS,
                       {"engineering": ["alice"]})  # fmt: skip
    config = {"issuer": keycloak.issuer(REALM), "clientId": CLIENT_ID,
              "clientSecret": client_secret, "groupsClaim": "groups"}  # fmt: skip
    applied = api.post("/v3/authConfigs/oidc?action=testAndApply",
                       {"oidcConfig": config, "enabled": True})  # fmt: skip
    assert applied.status == 200, applied.body
    yield
    assert api.post("/v3/authConfigs/oidc?action=disable", {}).status == 200


def test_an_admin_configures_tests_and_enables_a_provider_from_its_page(
    stack: Environment, api: Api, page: Page, keycloak: Keycloak
) -> None:
    client_secret = secrets.token_urlsafe(24)
    keycloak.configure(KC_REALM, CLIENT_ID, client_secret, stack.api_url + KC_CALLBACK,
                       PASSWORDS, {})  # fmt: skip
    before = api.get("/v3/authConfigs/keycloakoidc").body
    assert before["enabled"] is False, before
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    page.get_by_role("link", name="Sign-in providers").click()
    expect(page.get_by_role("heading", name="Sign-in providers", level=1)).to_be_visible()
    shown = page.locator('tr[data-provider="keycloakoidc"]')
    expect(shown).to_contain_text("Disabled")
    expect(shown).to_contain_text(stack.api_url + KC_CALLBACK)
    expect(page.locator('tr[data-provider="local"]')).to_contain_text("Enabled")

    shown.get_by_role("button", name="Edit Keycloak").click()
    form = page.get_by_role("form", name="Keycloak settings")
    # The API's own refusal, at the field it names, and nothing saved.
    refused = api.post("/v3/authConfigs/keycloakoidc?action=testAndApply",
                       {"oidcConfig": {"issuer": "not-a-url"}, "enabled": True})  # fmt: skip
    assert refused.status == 422 and refused.body["fieldName"] == "issuer", refused.body
    form.get_by_label("Issuer").fill("not-a-url")
    form.get_by_role("button", name="Test and enable").click()
    expect(field_error(page, "Issuer")).to_have_text(refused.body["message"])
    assert api.get("/v3/authConfigs/keycloakoidc").body["issuer"] == before["issuer"]
    for theme in ("light", "dark"):
        in_theme(page, theme)
        assert axe_violations(page) == [], f"providers page with a refusal, {theme}"
    page.screenshot(path=SCREENSHOTS / "providers-refused.png", full_page=True)
    in_theme(page, "light")

    form.get_by_label("Issuer").fill(keycloak.issuer(KC_REALM))
    form.get_by_label("Client ID").fill(CLIENT_ID)
    form.get_by_label("Client secret").fill(client_secret)
    form.get_by_role("button", name="Test", exact=True).click()
    expect(form.get_by_role("status")).to_contain_text(
        f"sign-in at {keycloak.issuer(KC_REALM)}/protocol/openid-connect/auth"
    )
    assert api.get("/v3/authConfigs/keycloakoidc").body["enabled"] is False  # a test saves nothing
    form.get_by_role("button", name="Test and enable").click()
    expect(form).to_have_count(0)
    expect(shown).to_contain_text("Enabled")
    applied = api.get("/v3/authConfigs/keycloakoidc").body
    assert (applied["enabled"], applied["issuer"], applied["clientId"]) == (
        True, keycloak.issuer(KC_REALM), CLIENT_ID)  # fmt: skip
    assert "clientSecret" not in applied
    # Write-only: the secret is nowhere in the page once saved, not even in the form again.
    shown.get_by_role("button", name="Edit Keycloak").click()
    expect(
        page.get_by_role("form", name="Keycloak settings").get_by_label("Client secret")
    ).to_have_value("")
    assert client_secret not in page.content()
    page.get_by_role("button", name="Cancel").click()

    # Anyone may now sign in through it: its button is on the sign-in page.
    listed = api.get("/v3-public/authProviders", auth=False).body["data"]
    assert "keycloakoidc" in {p["id"] for p in listed}
    shown.get_by_role("button", name="Disable Keycloak").click()
    expect(shown).to_contain_text("Disabled")
    assert api.get("/v3/authConfigs/keycloakoidc").body["enabled"] is False


def test_a_plain_user_is_told_the_page_is_for_administrators(
    stack: Environment, page: Page, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    sign_in(page, stack.api_url, person.username, person.password)
    visit(page, "#/access/providers")
    expect(
        page.get_by_text("Only administrators see and change the sign-in providers.")
    ).to_be_visible()
    expect(page.get_by_role("button", name="Edit OpenID Connect")).to_have_count(0)


def test_a_keycloak_user_signs_in_acts_as_themselves_and_signs_out(
    stack: Environment, api: Api, page: Page, context: BrowserContext,
    corral_tls: ssl.SSLContext, keycloak: Keycloak, oidc: None,
) -> None:  # fmt: skip
    cluster_id = stack.cluster_ids[0]
    binding = api.post("/v3/clusterroletemplatebindings", {
        "clusterId": cluster_id, "groupPrincipalId": "oidc_group://engineering",
        "roleTemplateId": "cluster-member"})  # fmt: skip
    assert binding.status == 201, binding.body
    project_id = ""
    try:
        for theme in ("light", "dark"):
            page.emulate_media(color_scheme=theme)
            console.goto(page, stack.api_url)
            expect(page.get_by_role("link", name="Sign in with OpenID Connect")).to_be_visible()
            assert axe_violations(page) == [], f"sign-in page with a provider, {theme}"
        page.screenshot(path=SCREENSHOTS / "signin-providers.png", full_page=True)
        page.emulate_media(color_scheme="light")

        # A link to the cluster's page, opened signed out: signed in, the browser is back on it.
        console.goto(page, f"{stack.api_url}/#/clusters/{cluster_id}")
        page.get_by_role("link", name="Sign in with OpenID Connect").click()
        # Keycloak's own login form, as a user sees it.
        expect(page).to_have_url(re.compile(re.escape(keycloak.issuer(REALM)) + "/"))
        page.locator("#username").fill("alice")
        page.locator("#password").fill(PASSWORDS["alice"])
        page.locator("#kc-login").click()
        # corral's callback set the session and sent the browser back to the console's page.
        cluster = api.get(f"/v3/clusters/{cluster_id}").body
        expect(page.get_by_role("heading", name=cluster["name"], level=1)).to_be_visible()
        assert page.url == f"{stack.api_url}/#/clusters/{cluster_id}", page.url
        expect(page.get_by_test_id("user")).to_have_text("Alice Example")
        session = Api(stack.api_url, corral_tls, session_token(context))
        current = next(t for t in session.get("/v3/tokens").body["data"] if t["current"])
        assert current["authProvider"] == "oidc"
        alice = current["userId"]

        # What her group's binding gives her, and no more: the cluster, no Delete on it, and
        # projects she creates.
        expect(page.get_by_role("button", name="Download kubeconfig")).to_be_visible()
        expect(page.get_by_role("button", name="Delete", exact=True)).to_have_count(0)
        visit(page, "#/clusters")
        expect(row(page, cluster_id)).to_be_visible()
        visit(page, f"#/clusters/{cluster_id}/projects")
        expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
        page.get_by_role("button", name="Create project").click()
        form = page.get_by_role("form", name="Create a project")
        page.get_by_label("Name", exact=True).fill("alice-console")
        form.get_by_role("button", name="Create").click()
        expect(form).to_have_count(0)
        made = [p for p in api.get(f"/v3/projects?clusterId={cluster_id}").body["data"]
                if p["name"] == "alice-console"]  # fmt: skip
        assert len(made) == 1, made
        project_id = made[0]["id"]
        # Made as her: the API binds a project's creator as its owner.
        owners = api.get(f"/v3/projectroletemplatebindings?projectId={project_id}").body["data"]
        assert [(b["userId"], b["roleTemplateId"]) for b in owners] == [(alice, "project-owner")]
        expect(page.locator(f'[data-project="{project_id}"]')).to_be_visible()

        token = session_token(context)
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("status").filter(has_text="You have signed out.")).to_be_visible()
        expect(page.get_by_role("link", name="Sign in with OpenID Connect")).to_be_visible()
        ended = Api(stack.api_url, corral_tls, token).get("/v3/clusters")
        assert ended.status in (401, 404, 410), ended.body
    finally:
        if project_id:
            assert api.delete(f"/v3/projects/{project_id}").status in (200, 204)
        unbound = api.delete(f"/v3/clusterroletemplatebindings/{binding.body['id']}")
        assert unbound.status in (200, 204), unbound.body


def test_a_sign_in_declined_at_keycloak_returns_to_the_sign_in_page_saying_so(
    stack: Environment, page: Page, context: BrowserContext, keycloak: Keycloak, oidc: None
) -> None:
    # Keycloak asks the user to consent to corral reading their profile; declining ("No")
    # answers corral's callback with `error=access_denied`, as a cancelled sign-in does.
    client = keycloak.admin("GET", f"/{REALM}/clients?clientId={CLIENT_ID}")[0]
    keycloak.admin("PUT", f"/{REALM}/clients/{client['id']}", {**client, "consentRequired": True})
    try:
        cluster_id = stack.cluster_ids[0]
        console.goto(page, f"{stack.api_url}/#/clusters/{cluster_id}")
        page.get_by_role("link", name="Sign in with OpenID Connect").click()
        expect(page).to_have_url(re.compile(re.escape(keycloak.issuer(REALM)) + "/"))
        page.locator("#username").fill("alice")
        page.locator("#password").fill(PASSWORDS["alice"])
        page.locator("#kc-login").click()
        page.get_by_role("button", name="No").click()

        # Back on corral's sign-in page with why, not an error body; the page asked for is
        # kept for the next try, the reason dropped from the address, and no session made.
        expect(page.locator("#signin-error")).to_have_text(
            "The sign-in was cancelled at the provider, or the provider denied it."
        )
        expect(page).to_have_url(f"{stack.api_url}/#/clusters/{cluster_id}")
        assert "R_SESS" not in {c["name"] for c in context.cookies()}
        expect(page.get_by_role("link", name="Sign in with OpenID Connect")).to_be_visible()
        for theme in ("light", "dark"):
            page.emulate_media(color_scheme=theme)
            page.reload()  # the system's theme is read as the page loads; the message goes
            expect(page.get_by_label("Username")).to_be_visible()
            assert page.evaluate("document.documentElement.dataset.theme") == theme
            expect(page.locator("#signin-error")).to_have_text("")
            console.goto(page, f"{stack.api_url}/?signInError=state#/clusters/{cluster_id}")
            expect(page.locator("#signin-error")).to_contain_text("took too long")
            assert axe_violations(page) == [], f"sign-in page with a refusal, {theme}"
        page.screenshot(path=SCREENSHOTS / "signin-refused.png")
    finally:
        keycloak.admin("PUT", f"/{REALM}/clients/{client['id']}", client)
