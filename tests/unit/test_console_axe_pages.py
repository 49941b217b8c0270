"""axe-core runs on every page of the console (issue #27): the browser tests' table of pages
(`AXE_PAGES` in tests/e2e/test_console.py) names every route of console/src/route.ts and the
sign-in page, and each test it names exists and runs axe-core in both themes. Read as text,
so a route added without its axe-core check fails here, without a browser."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUTE_TS = (ROOT / "console" / "src" / "route.ts").read_text()
E2E = ROOT / "tests" / "e2e"


def _route_pages() -> set[str]:
    union = ROUTE_TS[
        ROUTE_TS.index("export type Route =") : ROUTE_TS.index(
            ";\n", ROUTE_TS.index("export type Route =")
        )
    ]
    return set(re.findall(r'page: "([a-z-]+)"', union))


def _tests() -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for module in sorted(E2E.glob("test_console*.py")):
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[node.name] = node
    return found


def _axe_pages() -> dict[str, list[str]]:
    tree = ast.parse((E2E / "test_console.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "AXE_PAGES" for t in node.targets
        ):
            pages: dict[str, list[str]] = ast.literal_eval(node.value)
            return pages
    raise AssertionError("tests/e2e/test_console.py has no AXE_PAGES")


def test_every_route_and_the_sign_in_page_have_an_axe_check() -> None:
    pages = _route_pages()
    assert {"clusters", "providers", "pod"} <= pages  # the union was read
    assert set(_axe_pages()) == pages | {"sign-in"}


def test_each_test_named_runs_axe_in_both_themes() -> None:
    tests = _tests()
    for page, names in _axe_pages().items():
        assert names, page
        for name in names:
            assert name in tests, f"{page}: no test {name}"
            source = ast.unparse(tests[name])
            assert "axe_violations(page)" in source, f"{page}: {name} runs no axe-core"
            assert "light" in source and "dark" in source, f"{page}: {name} is not in both themes"
