"""The web console in a real browser: Debian's Chromium driven by Playwright against the stack
`make run` starts. Sign in, the imported cluster in the list, changes shown without a reload,
sign out, an ended session, no request outside corral, axe-core, themes and the keyboard.

Each test saves a screenshot under tests/e2e/screenshots/ (git-ignored), named after it.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from corral.devenv.environment import Environment

from ..conftest import ROOT
from .api import Api

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


def sign_in(page: Page, url: str, username: str, password: str) -> None:
    page.goto(url)
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
    page.goto(stack.api_url)
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
    page.goto(stack.api_url)
    expect(page.get_by_label("Username")).to_be_visible()
    assert page.evaluate("document.documentElement.dataset.theme") == theme
    assert axe_violations(page) == [], "sign-in page"
    sign_in(page, stack.api_url, "admin", stack.admin_password)
    expect(row(page, stack.cluster_ids[0])).to_be_visible()
    assert axe_violations(page) == [], "clusters page"


def test_keyboard_alone_signs_in_and_switches_the_theme(stack: Environment, page: Page) -> None:
    page.emulate_media(color_scheme="light")
    page.goto(stack.api_url)
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
    """Prints the figures docs/console.md records (no timing is asserted)."""
    started = time.monotonic()
    page.goto(stack.api_url)
    expect(page.get_by_label("Username")).to_be_visible()
    first_render = time.monotonic() - started
    paint = page.evaluate(
        "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null"
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
        "sign_in_to_listed_s": round(interactive, 3),
        "cold_shell_transfer_bytes": sum(e["transfer"] for e in shell),
        "cold_shell_decoded_bytes": sum(e["body"] for e in shell),
        "all_transfer_bytes": sum(e["transfer"] for e in entries),
    }
    print("console figures:", json.dumps(figures))
    assert figures["cold_shell_transfer_bytes"] > 0
