"""The web console in a real browser: Debian's Chromium driven by Playwright against the stack
`make run` starts. Sign in, the imported cluster in the list, changes shown without a reload,
sign out, an ended session, no request outside corral, axe-core, themes and the keyboard.

Each test saves a screenshot under tests/e2e/screenshots/ (git-ignored), named after it.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client as k8s
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Error,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from corral.devenv.agents import agent_environment, run_registration
from corral.devenv.environment import Environment
from corral.devenv.kwok import SIMULATED_LOG
from corral.devenv.waiting import wait_for

from ..conftest import ROOT
from .api import Api
from .conftest import Person

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package (`make browser-deps`)
SCREENSHOTS = ROOT / "tests" / "e2e" / "screenshots"
AXE = ROOT / "console" / "node_modules" / "axe-core" / "axe.min.js"
# What a state change may take to show: the operator's look every 5 s, the watch, the socket.
LIVE_WAIT_MS = 60_000
GROUP, VERSION = "management.svc.io", "v3"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="make browser-deps installs it")


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # Chromium's sandbox needs an unprivileged user; these tests run as root.
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
    yield launched
    launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    # corral's serving certificate is from its own CA, which Chromium is not told about.
    made = browser.new_context(ignore_https_errors=True, viewport={"width": 1280, "height": 800})
    yield made
    made.close()


@pytest.fixture
def page(context: BrowserContext, request: pytest.FixtureRequest) -> Iterator[Page]:
    opened = context.new_page()
    yield opened
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    opened.screenshot(path=SCREENSHOTS / f"{request.node.name}.png", full_page=True)


def goto(page: Page, url: str) -> None:
    """`page.goto`, once more when Chromium dropped the navigation because the host's network
    changed: the real-node modules running beside these tests add and remove interfaces, and
    Chromium aborts what is in flight at each change, as a user would see and reload."""
    try:
        page.goto(url)
    except Error as exc:
        if "ERR_NETWORK_CHANGED" not in exc.message:
            raise
        page.goto(url)


def sign_in(page: Page, url: str, username: str, password: str) -> None:
    goto(page, url)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Clusters")).to_be_visible()


def row(page: Page, cluster_id: str) -> Any:
    return page.locator(f'[data-cluster="{cluster_id}"]')


def encoded(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def session_token(context: BrowserContext) -> str:
    return next(c["value"] for c in context.cookies() if c["name"] == "R_SESS")


def test_sign_in_shows_the_imported_cluster(stack: Environment, api: Api, page: Page) -> None:
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    cluster_id = stack.cluster_ids[0]
    demo = api.get(f"/v3/clusters/{cluster_id}").body
    shown = row(page, cluster_id)
    expect(shown).to_contain_text(demo["name"])
    expect(shown).to_contain_text("active")
    expect(shown).to_contain_text(demo["status"]["version"]["gitVersion"])
    expect(shown).to_contain_text("imported")
    expect(shown.get_by_role("cell").nth(4)).to_have_text(str(demo["status"]["nodeCount"]))
    expect(shown).to_contain_text("healthy")
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()


def test_a_wrong_password_shows_the_apis_message(stack: Environment, page: Page) -> None:
    goto(page, stack.api_url)
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("authentication failed")
    expect(page.get_by_role("heading", name="Sign in to corral")).to_be_visible()


def test_changes_show_without_a_reload(
    stack: Environment, api: Api, page: Page, add_downstream: Any
) -> None:
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    plane = add_downstream("console", nodes=1)
    imported = {"kubeConfig": encoded(plane.kubeconfig_path)}
    created = api.post("/v3/clusters", {"name": "console-live", "importedConfig": imported})
    assert created.status == 201, created.body
    cluster_id = created.body["id"]
    shown = row(page, cluster_id)
    expect(shown).to_contain_text("console-live")
    expect(shown).to_contain_text("active", timeout=LIVE_WAIT_MS)
    plane.stop_apiserver()
    try:
        expect(shown).to_contain_text("unavailable", timeout=LIVE_WAIT_MS)
        expect(shown).to_contain_text("Ready: False (Unreachable)")
    finally:
        plane.start_apiserver()
        plane.wait_apiserver()
    expect(shown).to_contain_text("active", timeout=LIVE_WAIT_MS)
    assert api.delete(f"/v3/clusters/{cluster_id}").status == 204
    expect(shown).to_have_count(0, timeout=LIVE_WAIT_MS)
    assert page.evaluate("window.loadedOnce") is True


def test_sign_out_ends_the_session(
    stack: Environment, page: Page, context: BrowserContext, corral_tls: ssl.SSLContext
) -> None:
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    token = session_token(context)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("status").filter(has_text="You have signed out.")).to_be_visible()
    expect(page.get_by_label("Username")).to_be_visible()
    # The token is gone on the server, not only forgotten by the page.
    ended = Api(stack.api_url, corral_tls, token).get("/v3/clusters")
    assert ended.status in (401, 404, 410), ended.body


def test_an_ended_session_returns_to_the_sign_in_page(
    stack: Environment, page: Page, context: BrowserContext, crs: k8s.CustomObjectsApi
) -> None:
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    name = session_token(context).split(":")[0]
    crs.delete_cluster_custom_object(GROUP, VERSION, "tokens", name)
    # The next event or ping finds the session over; the page asks /v3 and goes back.
    expect(page.get_by_text("Your session has ended. Sign in again to continue.")).to_be_visible(
        timeout=LIVE_WAIT_MS
    )
    expect(page.get_by_label("Username")).to_be_visible()


def test_nothing_is_requested_outside_corral_and_no_policy_is_broken(
    stack: Environment, page: Page
) -> None:
    requested: list[str] = []
    problems: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.on("websocket", lambda w: requested.append(w.url))  # not among the requests
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    expect(row(page, stack.cluster_ids[0])).to_be_visible()
    own = urlsplit(stack.api_url).netloc
    assert requested and all(urlsplit(u).netloc == own for u in requested), requested
    assert any(urlsplit(u).path == "/v3/subscribe" for u in requested)
    # A Content-Security-Policy violation is reported on the console as an error.
    assert [p for p in problems if "401" not in p] == []


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page as it is."""
    page.evaluate(AXE.read_text())
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_axe_finds_nothing_serious_in_either_theme(
    stack: Environment, page: Page, theme: str
) -> None:
    page.emulate_media(color_scheme=theme)
    goto(page, stack.api_url)
    expect(page.get_by_label("Username")).to_be_visible()
    assert page.evaluate("document.documentElement.dataset.theme") == theme
    assert axe_violations(page) == [], "sign-in page"
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    expect(row(page, stack.cluster_ids[0])).to_be_visible()
    assert axe_violations(page) == [], "clusters page"


# Every page of the console (console/src/route.ts's routes and the sign-in page) and the tests
# that run axe-core on it in both themes; tests/unit/test_console_axe_pages.py checks that a
# route added to route.ts is added here and that each test named runs axe-core.
AXE_PAGES = {
    "sign-in": ["test_axe_finds_nothing_serious_in_either_theme",
                "test_axe_finds_nothing_serious_on_the_pages_the_others_leave"],
    "clusters": ["test_axe_finds_nothing_serious_in_either_theme"],
    "create-cluster": ["test_axe_finds_nothing_serious_on_the_pages_the_others_leave"],
    "cluster": ["test_a_clusters_page_shows_its_conditions_and_nodes_and_gives_a_kubeconfig"],
    "projects": ["test_a_project_is_created_with_quotas_and_the_apis_field_errors_shown"],
    "project": ["test_a_projects_namespaces_secrets_and_events_from_its_page",
                "test_a_namespace_is_deleted_from_its_projects_page_where_its_links_allow"],
    "workloads": ["test_a_workload_is_created_scaled_redeployed_and_deleted_from_its_page"],
    "pod": ["test_a_pods_log_is_followed_and_a_command_runs_in_its_terminal"],
    "access": ["test_axe_finds_nothing_serious_on_the_access_pages"],
    "providers": ["test_axe_finds_nothing_serious_on_the_pages_the_others_leave"],
}  # fmt: skip


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_pages_the_others_leave(
    stack: Environment, page: Page, theme: str
) -> None:
    """What the other tests reach in one theme only or not at all: the sign-in page with the
    API's refusal, the create-cluster tabs and provision form with a second pool, and the
    sign-in providers page with a provider's form open."""
    page.emulate_media(color_scheme=theme)
    goto(page, stack.api_url)
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("authentication failed")
    assert page.evaluate("document.documentElement.dataset.theme") == theme
    assert axe_violations(page) == [], f"sign-in page with a refusal, {theme}"

    sign_in(page, stack.api_url, "admin", stack.admin_password)
    open_create_cluster(page)
    for tab in ("Import", "Register", "Provision"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
        if tab == "Provision":
            page.get_by_role("button", name="Add a pool").click()
        assert axe_violations(page) == [], f"create cluster, {tab}, {theme}"
    page.screenshot(path=SCREENSHOTS / f"create-cluster-provision-{theme}.png")

    visit(page, "#/access/providers")
    expect(page.locator('tr[data-provider="oidc"]')).to_be_visible()
    page.get_by_role("button", name="Edit OpenID Connect").click()
    expect(page.get_by_role("form", name="OpenID Connect settings")).to_be_visible()
    assert axe_violations(page) == [], f"sign-in providers with a form, {theme}"
    page.screenshot(path=SCREENSHOTS / f"providers-{theme}.png")


def test_keyboard_alone_signs_in_and_switches_the_theme(stack: Environment, page: Page) -> None:
    page.emulate_media(color_scheme="light")
    goto(page, stack.api_url)
    expect(page.get_by_label("Username")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.type("admin")
    page.keyboard.press("Tab")
    page.keyboard.type(stack.admin_password)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Clusters")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    theme = page.get_by_role("button", name="Dark theme")
    for _ in range(5):
        if page.evaluate("document.activeElement?.textContent") == "Dark theme":
            break
        page.keyboard.press("Tab")
    expect(theme).to_be_focused()
    page.keyboard.press("Space")
    expect(theme).to_have_attribute("aria-pressed", "true")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.reload()
    expect(page.get_by_role("heading", name="Clusters")).to_be_visible()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"


def test_first_render_interactive_list_and_cold_bytes(stack: Environment, page: Page) -> None:
    """Prints the figures docs/console.md records (no timing is asserted), and where the
    first render's time goes, as the page itself timed it."""
    # When the sign-in form enters the page, by the page's own clock (not Playwright's).
    page.add_init_script(
        "new MutationObserver((_, seen) => { if (document.getElementById('username')) {"
        " window.formShownAt = performance.now(); seen.disconnect(); } })"
        ".observe(document, {childList: true, subtree: true});"
    )
    started = time.monotonic()
    goto(page, stack.api_url)
    expect(page.get_by_label("Username")).to_be_visible()
    first_render = time.monotonic() - started
    paint = page.evaluate(
        "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null"
    )
    timeline = page.evaluate(
        "(() => { const n = performance.getEntriesByType('navigation')[0];"
        " const r = Object.fromEntries(performance.getEntriesByType('resource').map(e =>"
        " [new URL(e.name).pathname.replace(/-[A-Za-z0-9_-]{8}\\./, '.'),"
        " [Math.round(e.startTime), Math.round(e.responseEnd)]]));"
        " return {page_response_ms: Math.round(n.responseEnd),"
        " dom_interactive_ms: Math.round(n.domInteractive),"
        " dom_content_loaded_ms: Math.round(n.domContentLoadedEventEnd),"
        " form_in_page_ms: Math.round(window.formShownAt ?? -1), requests: r}; })()"
    )
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(stack.admin_password)
    clicked = time.monotonic()
    page.get_by_role("button", name="Sign in").click()
    expect(row(page, stack.cluster_ids[0])).to_be_visible()
    interactive = time.monotonic() - clicked
    entries = page.evaluate(
        "[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType("
        "'resource')].map(e => ({name: e.name, transfer: e.transferSize, body: e.decodedBodySize}))"
    )
    shell = [e for e in entries if "/v3" not in e["name"]]
    figures = {
        "first_render_s": round(first_render, 3),
        "first_contentful_paint_ms": paint,
        "first_render_timeline": timeline,
        "sign_in_to_listed_s": round(interactive, 3),
        "cold_shell_transfer_bytes": sum(e["transfer"] for e in shell),
        "cold_shell_decoded_bytes": sum(e["body"] for e in shell),
        "all_transfer_bytes": sum(e["transfer"] for e in entries),
    }
    print("console figures:", json.dumps(figures))
    assert figures["cold_shell_transfer_bytes"] > 0


def visit(page: Page, hash_route: str) -> None:
    """Go to a page of the console as a link would: the address's hash, no reload."""
    page.evaluate("route => { window.location.hash = route }", hash_route)


def bind(api: Api, cluster_id: str, person: Person, role: str) -> None:
    body = {"clusterId": cluster_id, "userId": person.id, "roleTemplateId": role}
    granted = api.post("/v3/clusterroletemplatebindings", body)
    assert granted.status == 201, granted.body


def node_row(page: Page, node_id: str) -> Any:
    return page.locator(f'[data-node="{node_id}"]')


def in_theme(page: Page, theme: str) -> None:
    """Switch the open page to `theme` with its toggle (the system's preference is read only
    when the page loads)."""
    if page.evaluate("document.documentElement.dataset.theme") != theme:
        page.get_by_role("button", name="Dark theme").click()
    assert page.evaluate("document.documentElement.dataset.theme") == theme


def test_a_clusters_page_shows_its_conditions_and_nodes_and_gives_a_kubeconfig(
    stack: Environment, api: Api, page: Page, corral_tls: ssl.SSLContext
) -> None:
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    cluster_id = stack.cluster_ids[0]
    demo = api.get(f"/v3/clusters/{cluster_id}").body
    row(page, cluster_id).get_by_role("link", name=demo["name"]).click()
    expect(page.get_by_role("heading", name=demo["name"], level=1)).to_be_visible()
    assert urlsplit(page.url).fragment == f"/clusters/{cluster_id}"
    for condition in demo["status"]["conditions"]:
        shown = page.locator(f'[data-condition="{condition["type"]}"]')
        expect(shown.get_by_role("cell").first).to_have_text(condition["status"])
    nodes = api.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]
    assert nodes
    for node in nodes:
        shown = node_row(page, node["id"])
        expect(shown).to_contain_text(node["state"])
        expect(shown.get_by_role("button", name=f"Cordon {node['displayName'] or node['name']}")
               ).to_be_visible()  # fmt: skip
    expect(page.get_by_role("status").filter(has_text="Live")).to_be_visible()
    with page.expect_download() as downloading:
        page.get_by_role("button", name="Download kubeconfig").click()
    saved = downloading.value
    assert saved.suggested_filename == f"{demo['name']}.yaml"
    kubeconfig = yaml.safe_load(Path(saved.path()).read_text())
    server = kubeconfig["clusters"][0]["cluster"]["server"]
    assert server.endswith(f"/k8s/clusters/{cluster_id}")
    # The kubeconfig works: its token reads the cluster's nodes through corral.
    token = kubeconfig["users"][0]["user"]["token"]
    listed = Api(stack.api_url, corral_tls, token).get(f"/k8s/clusters/{cluster_id}/api/v1/nodes")
    assert listed.status == 200, listed.body
    assert len(listed.body["items"]) == len(nodes)
    for theme in ("light", "dark"):
        in_theme(page, theme)
        assert axe_violations(page) == [], f"cluster page, {theme}"


def test_a_node_is_cordoned_drained_tainted_and_its_cluster_deleted_from_its_page(
    stack: Environment, api: Api, page: Page, add_downstream: Any
) -> None:
    plane = add_downstream("console-page", nodes=1)
    imported = {"kubeConfig": encoded(plane.kubeconfig_path)}
    created = api.post("/v3/clusters", {"name": "console-page", "importedConfig": imported})
    assert created.status == 201, created.body
    cluster_id = created.body["id"]
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    visit(page, f"#/clusters/{cluster_id}")
    node = page.locator("[data-node]")
    expect(node).to_have_count(1, timeout=LIVE_WAIT_MS)
    expect(node).to_contain_text("active", timeout=LIVE_WAIT_MS)
    node_id = node.get_attribute("data-node")
    name = api.get(f"/v3/clusters/{cluster_id}/nodes/{node_id}").body["displayName"]

    node.get_by_role("button", name=f"Cordon {name}").click()
    expect(node).to_contain_text("cordoned", timeout=LIVE_WAIT_MS)
    assert api.get(f"/v3/clusters/{cluster_id}/nodes/{node_id}").body["unschedulable"] is True
    node.get_by_role("button", name=f"Uncordon {name}").click()
    expect(node).to_contain_text("active", timeout=LIVE_WAIT_MS)
    assert api.get(f"/v3/clusters/{cluster_id}/nodes/{node_id}").body["unschedulable"] is False

    node.get_by_role("button", name=f"Drain {name}").click()
    # The drain's outcome, as the operator reports it in the node's Drained condition.
    expect(node).to_contain_text("drained", timeout=LIVE_WAIT_MS)
    drained = api.get(f"/v3/clusters/{cluster_id}/nodes/{node_id}").body
    message = next(c["message"] for c in drained["status"]["conditions"] if c["type"] == "Drained")
    expect(node.get_by_role("cell").nth(2)).to_have_text(message)
    node.get_by_role("button", name=f"Uncordon {name}").click()
    expect(node).to_contain_text("active", timeout=LIVE_WAIT_MS)

    # Taints: a malformed key refused at its input with nothing changed, then one added and
    # removed, each shown from the node's event.
    node_url = f"/v3/clusters/{cluster_id}/nodes/{node_id}"
    key = node.get_by_label(f"Taint key for {name}")
    key.fill("bad key!")
    node.get_by_role("button", name=f"Add taint to {name}").click()
    expect(key).to_have_attribute("aria-invalid", "true")
    expect(node.locator(f"#{key.get_attribute('aria-describedby')}")).to_contain_text(
        "desiredNodeTaints[0].key"
    )
    assert not api.get(node_url).body["desiredNodeTaints"]
    key.fill("dedicated")
    node.get_by_label(f"Taint value for {name}").fill("gpu")
    node.get_by_label(f"Taint effect for {name}").select_option("PreferNoSchedule")
    node.get_by_role("button", name=f"Add taint to {name}").click()
    expect(node).to_contain_text("dedicated=gpu:PreferNoSchedule", timeout=LIVE_WAIT_MS)
    taints = [{"key": "dedicated", "value": "gpu", "effect": "PreferNoSchedule"}]
    assert api.get(node_url).body["desiredNodeTaints"] == taints
    node.get_by_role(
        "button", name=f"Remove taint dedicated=gpu:PreferNoSchedule from {name}"
    ).click()
    expect(node).not_to_contain_text("dedicated=gpu", timeout=LIVE_WAIT_MS)
    assert api.get(node_url).body["desiredNodeTaints"] == []

    page.get_by_role("button", name="Delete", exact=True).click()
    dialog = page.get_by_role("dialog", name="Delete cluster console-page?")
    expect(dialog).to_be_visible()
    confirm = dialog.get_by_role("button", name="Delete cluster")
    expect(confirm).to_be_disabled()
    dialog.get_by_label("Name of the cluster").fill("console-pag")
    expect(confirm).to_be_disabled()
    dialog.get_by_label("Name of the cluster").fill("console-page")
    confirm.click()
    expect(page.get_by_role("heading", name="Clusters")).to_be_visible()
    # Listed first (the cluster goes once the operator has cleaned up), then gone live.
    expect(page.get_by_text(re.compile(r"^\d+ of \d+ clusters$"))).to_be_visible()
    expect(row(page, cluster_id)).to_have_count(0, timeout=LIVE_WAIT_MS)
    assert api.get(f"/v3/clusters/{cluster_id}").status == 404
    assert page.evaluate("window.loadedOnce") is True


def test_a_member_who_may_not_act_is_offered_no_write_and_a_forced_one_is_403(
    stack: Environment, api: Api, page: Page, make_user: Any
) -> None:
    cluster_id = stack.cluster_ids[0]
    member = make_user()
    bind(api, cluster_id, member, "cluster-member")
    node = api.get(f"/v3/clusters/{cluster_id}/nodes").body["data"][0]
    # The API offers this member no write, and still refuses one forced past the console.
    shown = member.api.get(f"/v3/clusters/{cluster_id}").body
    assert not {"update", "remove"} & set(shown["links"]), shown["links"]
    cordon = member.api.post(f"/v3/clusters/{cluster_id}/nodes/{node['id']}?action=cordon")
    delete = member.api.delete(f"/v3/clusters/{cluster_id}")
    assert (cordon.status, delete.status) == (403, 403), (cordon.body, delete.body)

    sign_in(page, stack.api_url, member.username, member.password)
    visit(page, f"#/clusters/{cluster_id}")
    demo = api.get(f"/v3/clusters/{cluster_id}").body
    expect(page.get_by_role("heading", name=demo["name"], level=1)).to_be_visible()
    shown_node = node_row(page, node["id"])
    expect(shown_node).to_be_visible()
    expect(shown_node.get_by_role("button")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete", exact=True)).to_have_count(0)
    # What the member may do is still offered.
    expect(page.get_by_role("button", name="Download kubeconfig")).to_be_visible()
    # A write forced from the member's own session, as the console sends one: still 403.
    forced = page.evaluate(
        """async (path) => {
            const csrf = document.cookie.split("; ").find((c) => c.startsWith("CSRF="));
            const answer = await fetch(path, {method: "DELETE", headers: {
                "Accept": "application/json", "X-API-CSRF": (csrf ?? "").slice(5)}});
            return [answer.status, (await answer.json()).message];
        }""",
        f"/v3/clusters/{cluster_id}",
    )
    assert forced == [403, delete.body["message"]], forced
    assert api.get(f"/v3/clusters/{cluster_id}/nodes/{node['id']}").body["unschedulable"] is False
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "active"
    # The cluster's owner is offered what the member is not.
    assert {"update", "remove"} <= set(api.get(f"/v3/clusters/{cluster_id}").body["links"])


def test_a_pool_is_scaled_up_and_down_from_the_page(
    stack: Environment, api: Api, page: Page
) -> None:
    cluster_id = stack.cluster_ids[0]
    template = api.post("/v3/nodetemplates", {"name": "console", "kwokConfig": {"cpu": "2"}})
    assert template.status == 201, template.body
    prefix = f"console{secrets.token_hex(2)}-"
    made = api.post("/v3/nodepools", {"clusterId": cluster_id, "hostnamePrefix": prefix,
                                      "nodeTemplateName": template.body["id"], "quantity": 0,
                                      "worker": True})  # fmt: skip
    assert made.status == 201, made.body
    pool_id = made.body["id"]
    try:
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        visit(page, f"#/clusters/{cluster_id}")
        pool = page.locator(f'[data-pool="{pool_id}"]')
        expect(pool).to_contain_text("0 / 0")
        pool.get_by_role("button", name=f"Scale {prefix} up").click()
        expect(pool).to_contain_text("1 / 1", timeout=LIVE_WAIT_MS)
        machine = page.locator("[data-node]").filter(has_text=f"{prefix}1")
        expect(machine).to_contain_text("active", timeout=LIVE_WAIT_MS)
        assert api.get(f"/v3/nodepools/{pool_id}").body["quantity"] == 1
        pool.get_by_role("button", name=f"Scale {prefix} down").click()
        expect(pool).to_contain_text("0 / 0", timeout=LIVE_WAIT_MS)
        expect(machine).to_have_count(0, timeout=LIVE_WAIT_MS)
        assert api.get(f"/v3/nodepools/{pool_id}").body["quantity"] == 0
        expect(pool.get_by_role("button", name=f"Scale {prefix} down")).to_be_disabled()
    finally:
        assert api.delete(f"/v3/nodepools/{pool_id}").status in (204, 404)
        wait_for("the pool gone", lambda: api.get(f"/v3/nodepools/{pool_id}").status == 404, 60)
        api.delete(f"/v3/nodetemplates/{template.body['id']}")


def field_error(page: Page, label: str) -> Any:
    """The error shown at the input labelled `label` (its aria-describedby), once there."""
    field = page.get_by_label(label, exact=True)
    expect(field).to_have_attribute("aria-invalid", "true")
    described = field.get_attribute("aria-describedby")
    assert described, f"no error at {label}"
    return page.locator(f"#{described}")


def test_a_project_is_created_with_quotas_and_the_apis_field_errors_shown(
    stack: Environment, api: Api, page: Page
) -> None:
    cluster_id = stack.cluster_ids[0]
    before = {p["id"] for p in api.get(f"/v3/projects?clusterId={cluster_id}").body["data"]}
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    visit(page, f"#/clusters/{cluster_id}")
    page.get_by_role("link", name="Projects").click()
    expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
    for project in before:
        expect(page.locator(f'[data-project="{project}"]')).to_be_visible()
    page.get_by_role("button", name="Create project").click()
    form = page.get_by_role("form", name="Create a project")

    # Each refusal is the API's own, at the field it names, and nothing is created.
    def refused(name: str, **quotas: Any) -> dict[str, Any]:
        """What the API answers to the body the form sends, asked directly."""
        body = {"type": "project", "clusterId": cluster_id, "name": name, **quotas}
        answer = api.post("/v3/projects", body)
        assert answer.status == 422, answer.body
        return dict(answer.body)

    empty = refused("")
    form.get_by_role("button", name="Create").click()
    expect(field_error(page, "Name")).to_have_text(empty["message"])
    page.get_by_label("Name", exact=True).fill("console-web")
    page.get_by_label("CPU limit: project").fill("lots")
    malformed = refused("x", resourceQuota={"limit": {"limitsCpu": "lots"}})
    assert malformed["fieldName"] == "resourceQuota.limit.limitsCpu", malformed
    form.get_by_role("button", name="Create").click()
    expect(field_error(page, "CPU limit: project")).to_have_text(malformed["message"])
    page.get_by_label("CPU limit: project").fill("1")
    page.get_by_label("CPU limit: each namespace").fill("2")
    unheld = refused("x", resourceQuota={"limit": {"limitsCpu": "1"}},
                     namespaceDefaultResourceQuota={"limit": {"limitsCpu": "2"}})  # fmt: skip
    form.get_by_role("button", name="Create").click()
    # It names the namespace default (`namespaceDefaultResourceQuota.limit`) and its resource.
    assert unheld["fieldName"].startswith("namespaceDefaultResourceQuota"), unheld
    assert "limitsCpu" in unheld["message"], unheld
    expect(field_error(page, "CPU limit: each namespace")).to_have_text(unheld["message"])
    assert {p["id"] for p in api.get(f"/v3/projects?clusterId={cluster_id}").body["data"]} == before
    for theme in ("light", "dark"):
        in_theme(page, theme)
        assert axe_violations(page) == [], f"projects page with the form, {theme}"
    page.screenshot(path=SCREENSHOTS / "projects-form-refused.png", full_page=True)
    in_theme(page, "light")

    page.get_by_label("CPU limit: project").fill("2")
    page.get_by_label("CPU limit: each namespace").fill("500m")
    page.get_by_label("Default cpu limit").fill("250m")
    form.get_by_role("button", name="Create").click()
    expect(form).to_have_count(0)
    made = [p for p in api.get(f"/v3/projects?clusterId={cluster_id}").body["data"]
            if p["id"] not in before]  # fmt: skip
    assert len(made) == 1 and made[0]["name"] == "console-web", made
    project = made[0]
    assert project["resourceQuota"] == {"limit": {"limitsCpu": "2"}}
    assert project["namespaceDefaultResourceQuota"] == {"limit": {"limitsCpu": "500m"}}
    assert project["containerDefaultResourceLimit"] == {"limitsCpu": "250m"}
    shown = page.locator(f'[data-project="{project["id"]}"]')
    expect(shown).to_contain_text("CPU limit 2")
    expect(shown).to_contain_text("CPU limit 500m")
    # The operator's conditions, each made true in turn, reach the row as they come.
    expect(shown).to_contain_text("active", timeout=LIVE_WAIT_MS)

    shown.get_by_role("button", name="Delete console-web").click()
    dialog = page.get_by_role("dialog", name="Delete project console-web?")
    dialog.get_by_label("Name of the project").fill("console-web")
    dialog.get_by_role("button", name="Delete project").click()
    expect(shown).to_have_count(0, timeout=LIVE_WAIT_MS)
    wait_for("the project gone", lambda: api.get(f"/v3/projects/{project['id']}").status == 404, 60)


def test_a_role_in_a_project_is_granted_and_revoked_from_its_members(
    stack: Environment, api: Api, page: Page, make_user: Any
) -> None:
    cluster_id = stack.cluster_ids[0]
    made = api.post("/v3/projects", {"name": "console-members", "clusterId": cluster_id})
    assert made.status == 201, made.body
    project_id = made.body["id"]
    person = make_user()
    bindings = f"/v3/projectroletemplatebindings?projectId={project_id}"
    try:
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        visit(page, f"#/clusters/{cluster_id}/projects")
        page.get_by_role("button", name="Members of console-members").click()
        members = page.get_by_test_id("members")
        # The creator's own binding, made with the project.
        expect(members.get_by_role("row").filter(has_text="project-owner")).to_have_count(1)
        assert person.api.get(f"/v3/projects/{project_id}").status == 404

        members.get_by_label("User id or group principal").fill(person.id)
        members.get_by_label("Role", exact=True).select_option("read-only")
        members.get_by_role("button", name="Grant").click()
        granted = members.get_by_role("row").filter(has_text=person.id)
        expect(granted).to_contain_text("read-only")
        assert person.api.get(f"/v3/projects/{project_id}").status == 200

        # The same grant again: the API's 409, at the field, and still one binding.
        grant = {"projectId": project_id, "userId": person.id, "roleTemplateId": "read-only"}
        again = api.post("/v3/projectroletemplatebindings", grant)
        assert again.status == 409, again.body
        members.get_by_label("User id or group principal").fill(person.id)
        members.get_by_role("button", name="Grant").click()
        expect(members.locator("#grant-error")).to_have_text(again.body["message"])
        theirs = [b for b in api.get(bindings).body["data"] if b["userId"] == person.id]
        assert len(theirs) == 1, theirs

        members.get_by_role("button", name=f"Revoke read-only from {person.id}").click()
        expect(granted).to_have_count(0)
        assert [b for b in api.get(bindings).body["data"] if b["userId"] == person.id] == []
        wait_for("the role gone", lambda: person.api.get(f"/v3/projects/{project_id}").status
                 == 404, 30)  # fmt: skip
        for theme in ("light", "dark"):
            in_theme(page, theme)
            assert axe_violations(page) == [], f"members, {theme}"
    finally:
        api.delete(f"/v3/projects/{project_id}")


def test_the_delete_dialog_works_by_keyboard_and_escape_keeps_the_cluster(
    stack: Environment, api: Api, page: Page
) -> None:
    cluster_id = stack.cluster_ids[0]
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    demo = api.get(f"/v3/clusters/{cluster_id}").body
    link = row(page, cluster_id).get_by_role("link", name=demo["name"])
    link.focus()
    page.keyboard.press("Enter")
    delete = page.get_by_role("button", name="Delete", exact=True)
    expect(delete).to_be_visible()
    delete.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name=f"Delete cluster {demo['name']}?")
    # The dialog takes the focus to its first field; typing the name enables the button.
    expect(dialog.get_by_label("Name of the cluster")).to_be_focused()
    page.keyboard.type(demo["name"])
    expect(dialog.get_by_role("button", name="Delete cluster")).to_be_enabled()
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(delete).to_be_focused()
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "active"


def imported_with_exec(api: Api, add_downstream: Any, name: str, namespace: str) -> str:
    """A cluster imported for one test whose (kwok) pods in `namespace` run what exec asks;
    its id once active."""
    plane = add_downstream(name, nodes=1, stream_namespaces=[namespace])
    imported = {"kubeConfig": encoded(plane.kubeconfig_path)}
    created = api.post("/v3/clusters", {"name": name, "importedConfig": imported})
    assert created.status == 201, created.body
    cluster_id: str = created.body["id"]

    def active() -> bool:
        return bool(api.get(f"/v3/clusters/{cluster_id}").body.get("state") == "active")

    wait_for(f"{name} active", active, 120)
    return cluster_id


def project_with_namespace(api: Api, cluster_id: str, name: str, namespace: str) -> str:
    made = api.post("/v3/projects", {"name": name, "clusterId": cluster_id})
    assert made.status == 201, made.body
    project_id: str = made.body["id"]
    body = {"name": namespace, "projectId": project_id}
    wait_for(f"namespace {namespace}",
             lambda: api.post(f"/v3/clusters/{cluster_id}/namespaces", body).status in (201, 409),
             60)  # fmt: skip
    return project_id


def workload_row(page: Page, workload_id: str) -> Any:
    return page.locator(f'[data-workload="{workload_id}"]')


def test_a_workload_is_created_scaled_redeployed_and_deleted_from_its_page(
    stack: Environment, api: Api, page: Page, add_downstream: Any
) -> None:
    namespace = f"web-{secrets.token_hex(3)}"
    cluster_id = imported_with_exec(api, add_downstream, "console-work", namespace)
    try:
        project_id = project_with_namespace(api, cluster_id, "console-work", namespace)
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        page.evaluate("window.loadedOnce = true")  # gone if the page reloads
        visit(page, f"#/clusters/{cluster_id}/projects")
        page.get_by_role("link", name="Workloads of console-work").click()
        expect(page.get_by_role("heading", name="Workloads", level=1)).to_be_visible()
        expect(page.get_by_text("No workloads in this project.")).to_be_visible()

        # Refusals at their fields, nothing created: an empty name, a port out of range.
        page.get_by_role("button", name="Create workload").click()
        form = page.get_by_role("form", name="Create a workload")
        form.get_by_role("button", name="Create").click()
        expect(form.get_by_label("Name", exact=True)).to_have_attribute("aria-invalid", "true")
        expect(form.locator("#workload-name-error")).not_to_be_empty()
        form.get_by_label("Name", exact=True).fill("web")
        form.get_by_label("Namespace").select_option(namespace)
        form.get_by_label("Image").fill("busybox:1")
        form.get_by_label("Ports (8080, 53/UDP)").fill("99999")
        form.get_by_role("button", name="Create").click()
        expect(form.locator("#workload-ports-error")).to_contain_text("65535")
        expect(form.get_by_label("Ports (8080, 53/UDP)")).to_be_focused()
        workloads_url = f"/v3/projects/{project_id}/workloads"
        assert api.get(workloads_url).body["data"] == []

        form.get_by_label("Ports (8080, 53/UDP)").fill("8080")
        form.get_by_role("button", name="Create").click()
        expect(form).to_have_count(0)
        workload_id = f"deployment:{namespace}:web"
        shown = workload_row(page, workload_id)
        expect(shown).to_contain_text("busybox:1")
        expect(shown).to_contain_text("8080/TCP")
        expect(shown.locator("[data-pod]")).to_contain_text("running", timeout=LIVE_WAIT_MS)
        expect(shown).to_contain_text("active", timeout=LIVE_WAIT_MS)
        expect(shown.get_by_role("cell").nth(1)).to_have_text("1 / 1")

        shown.get_by_role("button", name="Scale web up").click()
        expect(shown.get_by_role("cell").nth(1)).to_have_text("2 / 2", timeout=LIVE_WAIT_MS)
        expect(shown.locator("[data-pod]")).to_have_count(2, timeout=LIVE_WAIT_MS)
        assert api.get(f"{workloads_url}/{workload_id}").body["scale"] == 2
        shown.get_by_role("button", name="Scale web down").click()
        expect(shown.locator("[data-pod]")).to_have_count(1, timeout=LIVE_WAIT_MS)
        assert api.get(f"{workloads_url}/{workload_id}").body["scale"] == 1

        before = shown.locator("[data-pod]").get_attribute("data-pod")
        shown.get_by_role("button", name="Redeploy web").click()
        # A new rollout: a new pod replaces the old one.
        expect(shown.locator(f'[data-pod="{before}"]')).to_have_count(0, timeout=LIVE_WAIT_MS)
        expect(shown.locator("[data-pod]")).to_contain_text("running", timeout=LIVE_WAIT_MS)

        for theme in ("light", "dark"):
            in_theme(page, theme)
            assert axe_violations(page) == [], f"workloads, {theme}"

        shown.get_by_role("button", name="Delete web").click()
        dialog = page.get_by_role("dialog", name="Delete workload web?")
        dialog.get_by_label("Name of the workload").fill("web")
        dialog.get_by_role("button", name="Delete workload").click()
        expect(shown).to_have_count(0, timeout=LIVE_WAIT_MS)
        assert api.get(f"{workloads_url}/{workload_id}").status == 404
        assert page.evaluate("window.loadedOnce") is True
    finally:
        assert api.delete(f"/v3/clusters/{cluster_id}").status in (200, 204, 404)


def test_a_workload_is_created_with_env_and_resources_from_the_form(
    stack: Environment, api: Api, page: Page, add_downstream: Any
) -> None:
    namespace = f"env-{secrets.token_hex(3)}"
    cluster_id = imported_with_exec(api, add_downstream, "console-env", namespace)
    try:
        project_id = project_with_namespace(api, cluster_id, "console-env", namespace)
        workloads_url = f"/v3/projects/{project_id}/workloads"
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        visit(page, f"#/projects/{project_id}/workloads")
        page.get_by_role("button", name="Create workload").click()
        form = page.get_by_role("form", name="Create a workload")
        form.get_by_label("Name", exact=True).fill("env")
        form.get_by_label("Namespace").select_option(namespace)
        form.get_by_label("Image").fill("busybox:1")
        form.get_by_role("button", name="Add variable").click()
        form.get_by_label("Variable 1 name").fill("GREETING")
        form.get_by_label("Variable 1 value").fill("hello there")

        # A quantity outside Kubernetes' grammar: the API's message at its input, nothing made.
        form.get_by_label("Memory limit (128Mi)").fill("lots")
        form.get_by_role("button", name="Create").click()
        error = field_error(page, "Memory limit (128Mi)")
        expect(error).to_contain_text("containers[0].resources.limits.memory")
        expect(form.get_by_label("Memory limit (128Mi)")).to_be_focused()
        assert api.get(workloads_url).body["data"] == []

        form.get_by_label("Memory limit (128Mi)").fill("64Mi")
        form.get_by_role("button", name="Create").click()
        expect(form).to_have_count(0)
        workload_id = f"deployment:{namespace}:env"
        expect(workload_row(page, workload_id)).to_contain_text("busybox:1")
        container = api.get(f"{workloads_url}/{workload_id}").body["containers"][0]
        assert container["env"] == [{"name": "GREETING", "value": "hello there"}]
        assert container["resources"]["limits"] == {"memory": "64Mi"}
    finally:
        assert api.delete(f"/v3/clusters/{cluster_id}").status in (200, 204, 404)


def terminal_chunks(page: Page) -> list[dict[str, Any]]:
    """The terminal's files the page has fetched (Resource Timing)."""
    found: list[dict[str, Any]] = page.evaluate(
        """() => performance.getEntriesByType("resource")
            .filter(e => new URL(e.name).pathname.startsWith("/static/PodTerminal-"))
            .map(e => ({name: e.name, transfer: e.transferSize, body: e.decodedBodySize}))"""
    )
    return found


def test_a_pods_log_is_followed_and_a_command_runs_in_its_terminal(
    stack: Environment, api: Api, page: Page, add_downstream: Any
) -> None:
    namespace = f"shell-{secrets.token_hex(3)}"
    cluster_id = imported_with_exec(api, add_downstream, "console-shell", namespace)
    try:
        project_id = project_with_namespace(api, cluster_id, "console-shell", namespace)
        container = {"name": "app", "image": "busybox:1"}
        body = {"name": "app", "namespaceId": namespace, "containers": [container]}
        made = api.post(f"/v3/projects/{project_id}/workloads", body)
        assert made.status == 201, made.body
        pods_url = f"/v3/projects/{project_id}/pods?workloadId={made.body['id']}"

        def running() -> str | None:
            pods = api.get(pods_url).body["data"]
            return next((p["id"] for p in pods if p["state"] == "running"), None)

        pod_id = wait_for("the pod running", running, 90)
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        aborted: list[str] = []
        page.on("requestfailed", lambda r: aborted.append(urlsplit(r.url).path))
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        visit(page, f"#/projects/{project_id}/workloads")
        page.locator(f'[data-pod="{pod_id}"]').get_by_role("link").click()
        expect(page.get_by_role("heading", name=pod_id.split(":")[1], level=1)).to_be_visible()

        # kwok's log of every simulated pod, followed.
        log = page.get_by_test_id("log")
        expect(log).to_contain_text(SIMULATED_LOG[0])
        expect(page.get_by_role("status").filter(has_text="Following")).to_be_visible()

        # xterm.js is fetched only when a terminal opens.
        assert terminal_chunks(page) == []
        page.get_by_role("button", name="Open terminal").click()
        status = page.get_by_test_id("terminal-status")
        expect(status).to_have_text("Connected", timeout=30_000)
        chunks = terminal_chunks(page)
        assert {urlsplit(c["name"]).path.rsplit(".", 1)[1] for c in chunks} == {"js", "css"}
        print("terminal chunk bytes:", json.dumps({
            "transfer": sum(c["transfer"] for c in chunks),
            "decoded": sum(c["body"] for c in chunks),
        }))  # fmt: skip
        terminal = page.get_by_test_id("terminal")
        # xterm's own rules reach the page despite the policy against inline styles.
        rows = terminal.locator(".xterm-rows")
        assert "monospace" in rows.evaluate("e => getComputedStyle(e).fontFamily")
        page.keyboard.type("echo corral-$((6*7))")
        page.keyboard.press("Enter")
        expect(rows).to_contain_text("corral-42")
        page.keyboard.type("exit 3")
        page.keyboard.press("Enter")
        expect(status).to_have_text("The shell has exited with code 3.")

        for theme in ("light", "dark"):
            in_theme(page, theme)
            assert axe_violations(page) == [], f"pod page, {theme}"

        # Leaving the page ends the followed log's request.
        logs_path = f"/v3/projects/{project_id}/pods/{pod_id}/logs"
        page.get_by_role("link", name="Workloads").click()
        expect(page.get_by_role("heading", name="Workloads", level=1)).to_be_visible()
        wait_for("the log's request ended", lambda: logs_path in aborted, 10)
        assert problems == []
    finally:
        assert api.delete(f"/v3/clusters/{cluster_id}").status in (200, 204, 404)


def workload_reads(requests: list[str], project_id: str) -> int:
    """How many times the page read the project's workloads collection."""
    path = f"/v3/projects/{project_id}/workloads"
    return sum(1 for url in requests if urlsplit(url).path.replace("%3A", ":") == path)


def test_a_workload_is_paused_resumed_and_rolled_back_and_its_changes_show_without_polling(
    stack: Environment, api: Api, page: Page
) -> None:
    cluster_id = stack.cluster_ids[0]
    namespace = f"live-{secrets.token_hex(3)}"
    project_id = project_with_namespace(api, cluster_id, "console-live-work", namespace)
    workloads_url = f"/v3/projects/{project_id}/workloads"
    body = {"name": "web", "namespaceId": namespace, "scale": 1,
            "containers": [{"name": "web", "image": "busybox:1"}]}  # fmt: skip
    made = api.post(workloads_url, body)
    assert made.status == 201, made.body
    workload_id = f"deployment:{namespace}:web"
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    try:
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        page.evaluate("window.loadedOnce = true")  # gone if the page reloads
        visit(page, f"#/projects/{project_id}/workloads")
        expect(page.get_by_text("Live", exact=True)).to_be_visible()
        shown = workload_row(page, workload_id)
        expect(shown).to_contain_text("active", timeout=LIVE_WAIT_MS)
        reads = workload_reads(requested, project_id)
        assert reads >= 1

        shown.get_by_role("button", name="Pause web").click()
        expect(shown).to_contain_text("paused", timeout=LIVE_WAIT_MS)
        assert api.get(f"{workloads_url}/{workload_id}").body["paused"] is True
        shown.get_by_role("button", name="Resume web").click()
        expect(shown.get_by_role("button", name="Pause web")).to_be_visible(timeout=LIVE_WAIT_MS)
        assert api.get(f"{workloads_url}/{workload_id}").body["paused"] is False

        # A change made elsewhere (another client) shows by its event alone.
        assert api.put(f"{workloads_url}/{workload_id}", {"scale": 2}).status == 200
        expect(shown.get_by_role("cell").nth(1)).to_have_text("2 / 2", timeout=LIVE_WAIT_MS)
        expect(shown.locator("[data-pod]")).to_have_count(2, timeout=LIVE_WAIT_MS)

        # A new revision (another image), then back to the first through the dialog.
        changed = api.put(f"{workloads_url}/{workload_id}",
                          {"containers": [{"name": "web", "image": "busybox:2"}]})  # fmt: skip
        assert changed.status == 200, changed.body
        expect(shown).to_contain_text("busybox:2", timeout=LIVE_WAIT_MS)
        revisions = f"{workloads_url}/{workload_id}/revisions"
        wait_for("two revisions", lambda: len(api.get(revisions).body["data"]) == 2, 60)
        dialog = page.get_by_role("dialog", name="Roll back web")
        # The dialog in both themes: the toggle is outside it, so it is closed to switch.
        for theme in ("light", "dark"):
            in_theme(page, theme)
            shown.get_by_role("button", name="Roll back web").click()
            first = dialog.get_by_role("radio", name=re.compile(r"Revision 1: busybox:1"))
            expect(first).to_be_checked()
            assert axe_violations(page) == [], f"rollback dialog, {theme}"
            if theme == "light":
                dialog.get_by_role("button", name="Cancel").click()
                expect(dialog).to_have_count(0)
        dialog.get_by_role("button", name="Roll back").click()
        expect(dialog).to_have_count(0)
        expect(shown).to_contain_text("busybox:1", timeout=LIVE_WAIT_MS)
        assert (
            api.get(f"{workloads_url}/{workload_id}").body["containers"][0]["image"] == "busybox:1"
        )

        for theme in ("light", "dark"):
            in_theme(page, theme)
            assert axe_violations(page) == [], f"workloads, {theme}"
        # Every change above came by the subscription: the list was read no more than when
        # the page opened (and once more for each reconnect, of which there was none).
        assert workload_reads(requested, project_id) == reads
        assert page.evaluate("window.loadedOnce") is True
    finally:
        assert api.delete(f"/v3/projects/{project_id}").status in (200, 204, 404)


def test_a_projects_namespaces_secrets_and_events_from_its_page(
    stack: Environment, api: Api, page: Page
) -> None:
    cluster_id = stack.cluster_ids[0]
    made = api.post("/v3/projects", {"name": "console-parts", "clusterId": cluster_id})
    assert made.status == 201, made.body
    project_id = made.body["id"]
    projects = api.get(f"/v3/projects?clusterId={cluster_id}").body["data"]
    default = next(p for p in projects if p["name"] == "Default")
    namespace = f"parts-{secrets.token_hex(3)}"
    value = f"never-shown-{secrets.token_hex(8)}"
    try:
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        visit(page, f"#/clusters/{cluster_id}/projects")
        page.get_by_role("link", name="console-parts", exact=True).click()
        expect(page.get_by_role("heading", name="console-parts", level=1)).to_be_visible()
        spaces = page.get_by_test_id("namespaces")
        expect(spaces.get_by_text("No namespaces in this project.")).to_be_visible()

        # An empty name: the API's refusal at the field, nothing made.
        form = spaces.get_by_role("form", name="Create a namespace")
        form.get_by_role("button", name="Create namespace").click()
        expect(form.get_by_label("Namespace name")).to_have_attribute("aria-invalid", "true")
        expect(form.locator("#namespace-error")).not_to_be_empty()
        form.get_by_label("Namespace name").fill(namespace)
        form.get_by_role("button", name="Create namespace").click()
        listed = spaces.locator(f'[data-namespace="{namespace}"]')
        expect(listed).to_be_visible(timeout=LIVE_WAIT_MS)
        found = api.get(f"/v3/clusters/{cluster_id}/namespaces/{namespace}").body
        assert found["projectId"] == project_id

        secrets_part = page.get_by_test_id("secrets")
        secrets_part.get_by_role("button", name="Create secret").click()
        secret_form = secrets_part.get_by_role("form", name="Create a secret")
        secret_form.get_by_label("Secret name").fill("db")
        secret_form.get_by_label("Key 1").fill("password")
        secret_form.get_by_label("Value 1").fill(value)
        secret_form.get_by_role("button", name="Create secret").click()
        expect(secret_form).to_have_count(0)
        shown = secrets_part.locator('[data-secret="db"]')
        expect(shown).to_contain_text("password")
        expect(shown).to_contain_text("Opaque")
        # The value went to the API once; nothing on the page holds it any more.
        assert value not in page.content()
        assert value not in json.dumps(page.evaluate(
            "() => [...document.querySelectorAll('input')].map(i => i.value)"))  # fmt: skip
        stored = api.get(f"/v3/projects/{project_id}/secrets").body["data"]
        assert [(s["name"], s["keys"]) for s in stored] == [("db", ["password"])]
        assert value not in json.dumps(stored)

        expect(page.get_by_test_id("events").get_by_role("heading", name="Events")).to_be_visible()
        for theme in ("light", "dark"):
            in_theme(page, theme)
            assert axe_violations(page) == [], f"project page, {theme}"

        secrets_part.get_by_role("button", name="Delete secret db").click()
        dialog = page.get_by_role("dialog", name="Delete secret db?")
        dialog.get_by_label("Name of the secret").fill("db")
        dialog.get_by_role("button", name="Delete secret").click()
        expect(shown).to_have_count(0)
        assert api.get(f"/v3/projects/{project_id}/secrets").body["data"] == []

        # Moved to the cluster's Default project: it leaves this project's list.
        listed.get_by_label(f"Move {namespace} to project").select_option(default["id"])
        expect(listed).to_have_count(0, timeout=LIVE_WAIT_MS)
        moved = api.get(f"/v3/clusters/{cluster_id}/namespaces/{namespace}").body
        assert moved["projectId"] == default["id"]
    finally:
        api.delete(f"/v3/clusters/{cluster_id}/namespaces/{namespace}")
        assert api.delete(f"/v3/projects/{project_id}").status in (200, 204, 404)


def test_a_namespace_is_deleted_from_its_projects_page_where_its_links_allow(
    stack: Environment, api: Api, page: Page, make_user: Any
) -> None:
    cluster_id = stack.cluster_ids[0]
    namespace = f"gone-{secrets.token_hex(3)}"
    project_id = project_with_namespace(api, cluster_id, "console-ns-delete", namespace)
    reader = make_user()
    grant = {"projectId": project_id, "userId": reader.id, "roleTemplateId": "read-only"}
    granted = api.post("/v3/projectroletemplatebindings", grant)
    assert granted.status == 201, granted.body
    try:
        # A reader sees the namespace and no Delete: the API gives them no remove link.
        sign_in(page, stack.api_url, reader.username, reader.password)
        visit(page, f"#/projects/{project_id}")
        listed = page.get_by_test_id("namespaces").locator(f'[data-namespace="{namespace}"]')
        expect(listed).to_be_visible(timeout=LIVE_WAIT_MS)
        expect(listed.get_by_role("button")).to_have_count(0)
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_label("Username")).to_be_visible()

        sign_in(page, stack.api_url, "admin", stack.admin_password)
        visit(page, f"#/projects/{project_id}")
        dialog = page.get_by_role("dialog", name=f"Delete namespace {namespace}?")
        confirm = dialog.get_by_role("button", name="Delete namespace")
        # The modal holds the page (the theme's toggle too): switched with the dialog closed.
        for theme in ("dark", "light"):
            in_theme(page, theme)
            listed.get_by_role("button", name=f"Delete namespace {namespace}").click()
            expect(confirm).to_be_disabled()  # until the namespace's name is typed
            assert axe_violations(page) == [], f"a namespace's delete dialog, {theme}"
            if theme == "dark":
                dialog.get_by_role("button", name="Cancel").click()
                expect(dialog).to_have_count(0)
        dialog.get_by_label("Name of the namespace").fill(namespace)
        confirm.click()
        # Gone from the page on the API's answer, without a reload; the cluster deletes it.
        expect(dialog).to_have_count(0)
        expect(listed).to_have_count(0)
        expect(page.get_by_test_id("namespaces").get_by_role("alert")).to_have_count(0)
        after = api.get(f"/v3/clusters/{cluster_id}/namespaces/{namespace}")
        assert after.status == 404 or after.body["state"] == "removing", after.body
    finally:
        api.delete(f"/v3/clusters/{cluster_id}/namespaces/{namespace}")
        assert api.delete(f"/v3/projects/{project_id}").status in (200, 204, 404)


def cluster_names(api: Api) -> set[str]:
    return {c["name"] for c in api.get("/v3/clusters").body["data"]}


def open_create_cluster(page: Page) -> None:
    page.get_by_role("link", name="Create cluster").click()
    expect(page.get_by_role("heading", name="Create a cluster", level=1)).to_be_visible()


def test_an_import_with_a_malformed_kubeconfig_shows_the_apis_message_and_makes_nothing(
    stack: Environment, api: Api, page: Page
) -> None:
    before = cluster_names(api)
    malformed = "apiVersion: v1\nkind: Config\nclusters: []\n"
    # What the API answers to the body the form sends, asked directly: refused, nothing made.
    body = {
        "type": "cluster",
        "name": "console-malformed",
        "importedConfig": {"kubeConfig": base64.b64encode(malformed.encode()).decode()},
    }
    refused = api.post("/v3/clusters", body)
    assert refused.status == 422, refused.body
    assert refused.body["fieldName"] == "importedConfig.kubeConfig", refused.body
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    open_create_cluster(page)
    expect(page.get_by_role("tab", name="Import")).to_have_attribute("aria-selected", "true")
    page.get_by_label("Name", exact=True).fill("console-malformed")
    page.get_by_label("Kubeconfig").fill(malformed)
    page.get_by_role("button", name="Import", exact=True).click()
    expect(field_error(page, "Kubeconfig")).to_have_text(refused.body["message"])
    expect(page.get_by_label("Kubeconfig")).to_be_focused()
    assert cluster_names(api) == before
    for theme in ("light", "dark"):
        in_theme(page, theme)
        assert axe_violations(page) == [], f"create cluster, refused, {theme}"
    page.screenshot(path=SCREENSHOTS / "create-cluster-refused.png", full_page=True)
    for tab in ("Register", "Provision"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
        assert axe_violations(page) == [], f"create cluster, {tab}"
    # The provisioning form offers the catalog's versions, as the API serves the setting.
    catalog = json.loads(api.get("/v3/settings/kubernetes-version-catalog").body["value"])
    offered = page.get_by_label("Kubernetes version").locator("option").all_text_contents()
    assert sorted(offered) == sorted(catalog), offered
    page.screenshot(path=SCREENSHOTS / "create-cluster-provision.png", full_page=True)
    in_theme(page, "light")
    page.get_by_role("link", name="Clusters").first.click()
    expect(page.get_by_text(re.compile(r"^\d+ of \d+ clusters$"))).to_be_visible()
    expect(page.locator("[data-cluster]").filter(has_text="console-malformed")).to_have_count(0)


def test_a_cluster_imported_from_the_console_turns_active_without_a_reload(
    stack: Environment, api: Api, page: Page, add_downstream: Any
) -> None:
    plane = add_downstream("console-import", nodes=1)
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    open_create_cluster(page)
    page.get_by_label("Name", exact=True).fill("console-import")
    page.get_by_label("Kubeconfig").fill(plane.kubeconfig_path.read_text())
    page.get_by_role("button", name="Import", exact=True).click()
    created = page.get_by_test_id("created")
    expect(created.get_by_role("heading")).to_have_text("Cluster console-import created")
    made = [c for c in api.get("/v3/clusters").body["data"] if c["name"] == "console-import"]
    assert len(made) == 1 and made[0]["driver"] == "imported", made
    cluster_id = made[0]["id"]
    try:
        expect(page.get_by_test_id("created-state")).to_have_text("active", timeout=LIVE_WAIT_MS)
        assert page.evaluate("window.loadedOnce") is True
        created.get_by_role("link", name="Open console-import").click()
        expect(page.get_by_role("heading", name="console-import", level=1)).to_be_visible()
        assert urlsplit(page.url).fragment == f"/clusters/{cluster_id}"
    finally:
        assert api.delete(f"/v3/clusters/{cluster_id}").status == 204


def test_a_cluster_registered_from_the_console_shows_its_command_and_turns_active(
    stack: Environment,
    api: Api,
    page: Page,
    context: BrowserContext,
    add_downstream: Any,
    devkube: Path,
    tmp_path: Path,
) -> None:
    """The command the page shows, run in the cluster as a user runs it, and the agent it
    deploys run as its Deployment would (test_cluster_agent.py): the page follows the
    cluster from waiting to active without a reload."""
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    plane = add_downstream("console-register", nodes=1)
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    open_create_cluster(page)
    page.get_by_role("tab", name="Register").click()
    page.get_by_label("Name", exact=True).fill("console-register")
    page.get_by_role("button", name="Create and show the command").click()
    created = page.get_by_test_id("created")
    expect(created.get_by_role("heading")).to_have_text("Cluster console-register created")
    made = [c for c in api.get("/v3/clusters").body["data"] if c["name"] == "console-register"]
    assert len(made) == 1, made
    cluster_id = made[0]["id"]
    agent: subprocess.Popen[bytes] | None = None
    try:
        token = api.get(f"/v3/clusterregistrationtokens/{cluster_id}:default-token").body
        commands = page.get_by_test_id("registration-command")
        expect(commands).to_have_text([token["command"], token["insecureCommand"]])
        # It waits for its agent, and the page says so as the API does.
        expect(page.get_by_test_id("created-state")).to_have_text(made[0]["state"])
        created.get_by_role("button", name="Copy").first.click()
        expect(created.get_by_role("status").filter(has_text="Copied.")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == token["command"]
        for theme in ("light", "dark"):
            in_theme(page, theme)
            assert axe_violations(page) == [], f"registered cluster, {theme}"
        page.screenshot(path=SCREENSHOTS / "create-cluster-registered.png", full_page=True)

        # corral's certificate is self-signed here, hence the second command, as shown.
        applied = run_registration(commands.nth(1).inner_text(), devkube, plane, tmp_path)
        assert applied.returncode == 0, applied.stderr

        def kubectl(*args: str) -> list[str]:
            return [str(devkube), "kubectl", f"--kubeconfig={plane.kubeconfig_path}", *args]

        env = agent_environment(kubectl, plane, tmp_path)
        with (tmp_path / "agent.log").open("ab") as log:
            agent = subprocess.Popen([sys.executable, "-m", "corral.agent"], env=env,
                                     stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        expect(page.get_by_test_id("created-state")).to_have_text("active", timeout=LIVE_WAIT_MS)
        assert page.evaluate("window.loadedOnce") is True
    finally:
        # The agent carries the clean-up of what the manifest made: it stays until it is done.
        assert api.delete(f"/v3/clusters/{cluster_id}").status == 204
        wait_for("the cluster gone",
                 lambda: api.get(f"/v3/clusters/{cluster_id}").status == 404, 120)  # fmt: skip
        if agent is not None:
            agent.terminate()
            agent.wait(10)


def test_a_cluster_provisioned_from_the_console_has_the_version_and_pools_chosen(
    stack: Environment, api: Api, page: Page
) -> None:
    """What the form sends is what the /v1 view holds; the cluster is followed from its first
    state (its control plane cannot come up here: that needs the real node)."""
    template = api.post("/v3/nodetemplates", {"name": "console-provision", "kwokConfig": {}})
    assert template.status == 201, template.body
    before = cluster_names(api)
    cluster_id = ""
    try:
        sign_in(page, stack.api_url, "admin", stack.admin_password)
        open_create_cluster(page)
        page.get_by_role("tab", name="Provision").click()
        page.get_by_label("Name", exact=True).fill("console-provision")
        page.get_by_label("Distribution").select_option("k3s")
        version = page.get_by_label("Kubernetes version").input_value()
        page.get_by_label("Node template").select_option(template.body["id"])
        page.get_by_label("Pool name").fill("Bad_Pool")
        # What the API answers to the body the form sends, asked directly: refused.
        pools = [
            {
                "name": "Bad_Pool",
                "quantity": 1,
                "workerRole": True,
                "etcdRole": False,
                "controlPlaneRole": False,
                "machineConfigRef": {"kind": "NodeTemplate", "name": template.body["id"]},
            }
        ]
        body = {"type": "provisioning.svc.io.cluster",
                "metadata": {"name": "console-provision", "namespace": "fleet-default"},
                "spec": {"kubernetesVersion": version, "k3sConfig": {"kubernetesVersion": version},
                         "rkeConfig": {"machinePools": pools}}}  # fmt: skip
        refused = api.post("/v1/provisioning.svc.io.clusters", body)
        assert refused.status == 422, refused.body
        assert refused.body["fieldName"] == "spec.rkeConfig.machinePools[0].name", refused.body
        page.get_by_role("button", name="Provision", exact=True).click()
        # The API's refusal of the pool's name, at that pool's name, and nothing made.
        expect(field_error(page, "Pool name")).to_have_text(refused.body["message"])
        assert cluster_names(api) == before
        page.get_by_label("Pool name").fill("workers")
        page.get_by_label("Machines").fill("2")
        page.get_by_role("button", name="Provision", exact=True).click()
        created = page.get_by_test_id("created")
        expect(created.get_by_role("heading")).to_have_text("Cluster console-provision created")
        view = api.get("/v1/provisioning.svc.io.clusters/fleet-default/console-provision").body
        cluster_id = view["status"]["clusterName"]
        assert view["spec"]["kubernetesVersion"] == version
        assert "k3sConfig" in view["spec"], view["spec"]
        [pool] = view["spec"]["rkeConfig"]["machinePools"]
        assert (pool["name"], pool["quantity"], pool["workerRole"]) == ("workers", 2, True), pool
        assert pool["machineConfigRef"] == {"kind": "NodeTemplate", "name": template.body["id"]}
        state = api.get(f"/v3/clusters/{cluster_id}").body["state"]
        expect(page.get_by_test_id("created-state")).not_to_have_text("unknown")
        assert state in ("pending", "provisioning", "active", "unavailable", "updating"), state
    finally:
        if cluster_id:
            assert api.delete(f"/v3/clusters/{cluster_id}").status == 204
            wait_for("the cluster gone",
                     lambda: api.get(f"/v3/clusters/{cluster_id}").status == 404, 120)  # fmt: skip
        api.delete(f"/v3/nodetemplates/{template.body['id']}")


LIFETIME_HINT = (
    "A whole number of minutes, hours or days: 90m, 8h, 30d; empty for the longest allowed"
)


def access_row(page: Page, kind: str, resource_id: str) -> Any:
    return page.locator(f'[data-{kind}="{resource_id}"]')


def test_a_token_is_created_its_key_shown_once_and_it_works(
    stack: Environment, api: Api, page: Page, context: BrowserContext
) -> None:
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.api_url)
    description = f"console {secrets.token_hex(3)}"
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    # The admin's tokens, the session the page signed in with among them.
    before = {t["id"] for t in api.get("/v3/tokens").body["data"]}
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Access").click()
    expect(page.get_by_role("heading", name="Tokens", level=1)).to_be_visible()
    expect(page.get_by_test_id("tokens")).to_be_visible()
    page.get_by_role("button", name="Create token").click()
    form = page.get_by_role("form", name="Create a token")
    form.get_by_label("Description").fill(description)

    # What is no lifetime is refused before it is sent; one the API refuses, by the API.
    form.get_by_label("Lifetime").fill("soon")
    form.get_by_role("button", name="Create").click()
    expect(field_error(page, "Lifetime")).to_have_text(LIFETIME_HINT)
    too_long = api.post("/v3/tokens", {"ttl": 200_000 * 86_400_000})
    assert (too_long.status, too_long.body["fieldName"]) == (422, "ttl"), too_long.body
    form.get_by_label("Lifetime").fill("200000d")
    form.get_by_role("button", name="Create").click()
    expect(field_error(page, "Lifetime")).to_have_text(too_long.body["message"])
    assert {t["id"] for t in api.get("/v3/tokens").body["data"]} == before

    form.get_by_label("Lifetime").fill("8h")
    form.get_by_role("button", name="Create").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    made = [t for t in api.get("/v3/tokens").body["data"] if t["id"] not in before]
    assert len(made) == 1 and made[0]["description"] == description, made
    token_id = made[0]["id"]
    assert made[0]["ttl"] == 8 * 3_600_000 and made[0]["clusterName"] == "", made
    expect(dialog.get_by_role("heading")).to_have_text(f"Token {token_id} created")
    expect(dialog).to_contain_text("cannot be shown again")
    key = dialog.get_by_label("Key").input_value()
    assert key.startswith(f"{token_id}:"), key
    dialog.get_by_role("button", name="Copy").click()
    expect(dialog.get_by_role("status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == key
    # The theme's toggle is behind the modal dialog: the theme is set as the toggle sets it.
    for theme in ("light", "dark"):
        page.evaluate("t => { document.documentElement.dataset.theme = t }", theme)
        assert axe_violations(page) == [], f"the key's dialog, {theme}"
    page.screenshot(path=SCREENSHOTS / "access-token-key-once.png", full_page=True)

    # The key works against /v3 as the admin's own token.
    holder = api.as_token(key)
    assert holder.get("/v3/clusters").status == 200
    shown = holder.get(f"/v3/tokens/{token_id}")
    assert shown.status == 200 and "token" not in shown.body, shown.body

    secret = key.split(":", 1)[1]
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_have_count(0)
    row_shown = access_row(page, "token", token_id)
    expect(row_shown).to_contain_text(description)
    expect(row_shown).to_contain_text("in 7 hours")
    assert secret not in page.content()
    page.reload()
    expect(access_row(page, "token", token_id)).to_be_visible()
    assert secret not in page.content()
    expect(page.get_by_role("dialog")).to_have_count(0)

    access_row(page, "token", token_id).get_by_role("button", name=f"Delete {token_id}").click()
    confirm = page.get_by_role("dialog", name=f"Delete token {token_id}?")
    confirm.get_by_label("Name of the token").fill(token_id)
    confirm.get_by_role("button", name="Delete token").click()
    expect(access_row(page, "token", token_id)).to_have_count(0)
    # A deleted token's answer (docs/api.md, "Authentication").
    gone = holder.get("/v3/clusters")
    assert (gone.status, gone.body["message"]) == (404, "token not found"), gone.body
    assert {t["id"] for t in api.get("/v3/tokens").body["data"]} == before


def test_a_user_is_refused_at_its_field_then_created_disabled_and_deleted(
    stack: Environment, api: Api, page: Page
) -> None:
    before = {u["id"] for u in api.get("/v3/users").body["data"]}
    username = f"console-{secrets.token_hex(3)}"
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    visit(page, "#/access/users")
    expect(page.get_by_role("heading", name="Users", level=1)).to_be_visible()
    expect(access_row(page, "user", "u-admin")).to_contain_text("(you)")
    # No one may disable or delete themselves: neither is offered on the admin's own row.
    expect(access_row(page, "user", "u-admin").get_by_role("button")).to_have_count(0)
    page.get_by_role("button", name="Create user").click()
    form = page.get_by_role("form", name="Create a local user")

    def refused(body: dict[str, Any]) -> dict[str, Any]:
        """What the API answers to the body the form sends, asked directly."""
        answer = api.post("/v3/users", body)
        assert answer.status == 422, answer.body
        return dict(answer.body)

    empty = refused({"username": "", "password": ""})
    assert empty["fieldName"] == "username", empty
    form.get_by_role("button", name="Create").click()
    expect(field_error(page, "Username")).to_have_text(empty["message"])
    form.get_by_label("Username").fill(username)
    form.get_by_label("Password (at least 12 characters)").fill("short")
    weak = refused({"username": username, "password": "short"})
    assert weak["fieldName"] == "password", weak
    form.get_by_role("button", name="Create").click()
    expect(field_error(page, "Password (at least 12 characters)")).to_have_text(weak["message"])
    assert {u["id"] for u in api.get("/v3/users").body["data"]} == before
    for theme in ("light", "dark"):
        in_theme(page, theme)
        assert axe_violations(page) == [], f"users page with the form, {theme}"
    page.screenshot(path=SCREENSHOTS / "access-user-refused.png", full_page=True)
    in_theme(page, "light")

    form.get_by_label("Password (at least 12 characters)").fill(secrets.token_urlsafe(16))
    form.get_by_label("Display name").fill("Console Person")
    form.get_by_role("button", name="Create").click()
    expect(form).to_have_count(0)
    made = [u for u in api.get("/v3/users").body["data"] if u["id"] not in before]
    assert len(made) == 1 and made[0]["username"] == username, made
    user_id = made[0]["id"]
    shown = access_row(page, "user", user_id)
    expect(shown).to_contain_text("Console Person")
    expect(shown).to_contain_text("enabled")

    shown.get_by_role("button", name=f"Disable {username}").click()
    expect(shown).to_contain_text("disabled")
    assert api.get(f"/v3/users/{user_id}").body["enabled"] is False
    shown.get_by_role("button", name=f"Enable {username}").click()
    expect(shown).to_contain_text("enabled")
    assert api.get(f"/v3/users/{user_id}").body["enabled"] is True

    shown.get_by_role("button", name=f"Delete {username}").click()
    confirm = page.get_by_role("dialog", name=f"Delete user {username}?")
    confirm.get_by_label("Name of the user").fill(username)
    confirm.get_by_role("button", name="Delete user").click()
    expect(shown).to_have_count(0)
    # The operator removes what was the user's before the user goes (its finalizer).
    wait_for("the user gone", lambda: api.get(f"/v3/users/{user_id}").status == 404, 60)


def test_a_global_role_is_granted_and_revoked_and_a_setting_edited(
    stack: Environment, api: Api, page: Page, make_user: Any, setting: Any
) -> None:
    person = make_user()
    setting("workload-max-scale", "1000")
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    visit(page, "#/access/globalrolebindings")
    expect(page.get_by_role("heading", name="Global role bindings", level=1)).to_be_visible()
    rows = page.get_by_test_id("globalrolebindings").get_by_role("row")
    theirs = rows.filter(has_text=person.id)
    # A new user's `user` role, made with them.
    expect(theirs).to_have_count(1)
    expect(theirs).to_contain_text("user")
    grant = page.get_by_role("form", name="Grant a global role")
    grant.get_by_label("User", exact=True).select_option(person.id)
    grant.get_by_label("Global role").select_option("admin")
    grant.get_by_role("button", name="Grant").click()
    expect(theirs).to_have_count(2)
    admin_binding = [b for b in api.get("/v3/globalrolebindings").body["data"]
                     if b["userId"] == person.id and b["globalRoleId"] == "admin"]  # fmt: skip
    assert len(admin_binding) == 1, admin_binding

    # As an admin they now see everyone's bindings, the first admin's too.
    def sees_all() -> bool:
        listed = person.api.get("/v3/globalrolebindings").body["data"]
        return any(b["userId"] == "u-admin" for b in listed)

    wait_for("the role in effect", sees_all, 30)
    page.get_by_role("button", name=f"Revoke admin from {person.username} ({person.id})").click()
    expect(theirs).to_have_count(1)
    assert [b for b in api.get("/v3/globalrolebindings").body["data"]
            if b["userId"] == person.id and b["globalRoleId"] == "admin"] == []  # fmt: skip

    visit(page, "#/access/settings")
    expect(page.get_by_role("heading", name="Settings", level=1)).to_be_visible()
    shown = access_row(page, "setting", "workload-max-scale")
    shown.get_by_role("button", name="Edit workload-max-scale").click()
    value = page.get_by_label("Value of workload-max-scale")
    wrong = api.put("/v3/settings/workload-max-scale", {"value": "lots"})
    assert (wrong.status, wrong.body["fieldName"]) == (422, "value"), wrong.body
    value.fill("lots")
    shown.get_by_role("button", name="Save").click()
    expect(field_error(page, "Value of workload-max-scale")).to_have_text(wrong.body["message"])
    assert api.get("/v3/settings/workload-max-scale").body["value"] == "1000"
    value.fill("999")
    shown.get_by_role("button", name="Save").click()
    expect(value).to_have_count(0)
    expect(shown.get_by_role("cell").first).to_have_text("999")
    assert api.get("/v3/settings/workload-max-scale").body["value"] == "999"


def test_a_user_without_a_global_role_is_offered_no_write_on_the_access_pages(
    stack: Environment, api: Api, page: Page, make_user: Any
) -> None:
    person = make_user()
    sign_in(page, stack.api_url, person.username, person.password)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Access").click()
    expect(page.get_by_role("heading", name="Tokens", level=1)).to_be_visible()
    tabs = page.get_by_role("navigation", name="Access")
    expect(tabs.get_by_role("link")).to_have_text(["Tokens", "Global role bindings", "Settings"])
    # Their own tokens are theirs to make; the session's own is not deleted (logout ends it).
    session = session_token(page.context).split(":")[0]
    expect(access_row(page, "token", session)).to_contain_text("this session")
    expect(access_row(page, "token", session).get_by_role("button")).to_have_count(0)

    visit(page, "#/access/users")
    expect(access_row(page, "user", person.id)).to_contain_text("(you)")
    expect(page.get_by_test_id("users").get_by_role("row")).to_have_count(2)  # head and them
    expect(page.get_by_role("button", name="Create user")).to_have_count(0)
    expect(page.get_by_test_id("users").get_by_role("button")).to_have_count(0)

    visit(page, "#/access/globalrolebindings")
    own = page.get_by_test_id("globalrolebindings").get_by_role("row").filter(has_text=person.id)
    expect(own).to_contain_text("user")
    expect(page.get_by_test_id("globalrolebindings").get_by_role("button")).to_have_count(0)
    expect(page.get_by_role("form", name="Grant a global role")).to_have_count(0)

    visit(page, "#/access/settings")
    expect(access_row(page, "setting", "workload-max-scale")).to_be_visible()
    expect(page.get_by_test_id("settings").get_by_role("button")).to_have_count(0)
    before = api.get("/v3/settings/workload-max-scale").body["value"]
    forced = page.evaluate(
        """async (path) => {
            const csrf = document.cookie.split("; ").find((c) => c.startsWith("CSRF="));
            const answer = await fetch(path, {method: "PUT", body: JSON.stringify({value: "5"}),
                headers: {"Accept": "application/json", "Content-Type": "application/json",
                          "X-API-CSRF": (csrf ?? "").slice(5)}});
            return answer.status;
        }""",
        "/v3/settings/workload-max-scale",
    )
    assert forced == 403
    assert api.get("/v3/settings/workload-max-scale").body["value"] == before


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_access_pages(
    stack: Environment, page: Page, theme: str
) -> None:
    page.emulate_media(color_scheme=theme)
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    for section, testid, opens in (
        ("tokens", "tokens", "Create token"),
        ("users", "users", "Create user"),
        ("globalrolebindings", "globalrolebindings", None),
        ("settings", "settings", None),
    ):
        visit(page, f"#/access/{section}")
        expect(page.get_by_test_id(testid)).to_be_visible()
        if opens:
            page.get_by_role("button", name=opens).click()
        assert axe_violations(page) == [], f"{section}, {theme}"
        page.screenshot(path=SCREENSHOTS / f"access-{section}-{theme}.png", full_page=True)
