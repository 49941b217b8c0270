"""The docs say what the code does, where a test can tell (issue #26): the `make` targets the
README names, the settings table of docs/api.md against the catalog, and docs/api.md's route
tables against the routes and actions the API server serves, both ways."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import web

from corral.apiserver.app import ROUTE_MODULES, SCHEMA_LIST
from corral.core.provisioning import catalog
from corral.core.settings import CATALOG

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
API_DOC = (ROOT / "docs" / "api.md").read_text()

# A Markdown cell boundary: a `|` not escaped as `\|` inside a cell.
CELL = re.compile(r"(?<!\\)\|")
METHODS = {"GET", "POST", "PUT", "DELETE", "PATCH"}
# A route table's method column says `any` where every method is passed on (the proxy).
ANY = "any"
# Actions a route answers by itself rather than through a schema's resourceActions or
# collectionActions: login is on /v3-public, which has no schemas (a public endpoint).
ROUTE_ACTIONS = {("/v3-public/localproviders/local", "login")}


def cells(line: str) -> list[str]:
    return [c.strip() for c in CELL.split(line.strip().strip("|"))]


def section(text: str, heading: str) -> str:
    """The body of the `## heading` section (up to the next heading of that level)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section {heading!r}"
    return match.group(1)


# --- make targets ----------------------------------------------------------------------


def makefile_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-zA-Z0-9_-]+):", makefile, re.M))


def readme_targets() -> set[str]:
    """`make x` in code (quoted, or a command line), and the bare names listed under
    "Other make targets"; "make" in prose is English."""
    named = set(re.findall(r"(?:^|`)make ([a-z][a-z0-9-]*)", README, re.M))
    listed = section(README, "Other make targets")
    return named | set(re.findall(r"`([a-z][a-z0-9-]*)`", listed))


def test_every_make_target_the_readme_names_exists() -> None:
    missing = readme_targets() - makefile_targets()
    assert not missing, f"README names make targets the Makefile lacks: {sorted(missing)}"


def test_every_make_target_with_help_is_in_the_readme() -> None:
    """`make help` lists the targets with a `##` comment; the README says what each is for."""
    makefile = (ROOT / "Makefile").read_text()
    helped = set(re.findall(r"^([a-zA-Z0-9_-]+):.*##", makefile, re.M))
    missing = helped - readme_targets()
    assert not missing, f"make targets the README never names: {sorted(missing)}"


# --- settings ---------------------------------------------------------------------------


def documented_settings() -> dict[str, tuple[str, str]]:
    """Setting name to (default, accepts) as the table of docs/api.md's Settings section."""
    rows: dict[str, tuple[str, str]] = {}
    for line in section(API_DOC, "Settings (`/v3/settings`)").splitlines():
        if line.startswith("| `"):
            name, default, accepts, _ = cells(line)
            rows[name.strip("`")] = (default, accepts)
    return rows


def upstream_catalog(words: str) -> bool:
    """Whether the catalog's default is what the docs say in words: the upstream
    (registry.k8s.io) images of the one version they name."""
    match = re.fullmatch(r"the upstream images of (v[0-9.]+)", words)
    if match is None:
        return False
    releases = catalog.parse(CATALOG[catalog.SETTING].default).releases
    images = [c.image for r in releases.values() for c in r.components.values()]
    return set(releases) == {match.group(1)} and all(
        i.startswith("registry.k8s.io/") for i in images
    )


def documented_default(name: str, shown: str) -> bool:
    """Whether the table's default is the catalog's. Defaults are plain values, but for
    `empty` (the empty string) and the version catalog (a JSON document, said in words)."""
    default = CATALOG[name].default
    if name == catalog.SETTING:
        return upstream_catalog(shown)
    if shown == "empty":
        return default == ""
    return shown == default


# The table writes a range with an en dash, as typeset text does.
RANGE = " \N{EN DASH} "


def documented_bounds(accepts: str) -> tuple[bool, float, float] | None:
    """(whole, minimum, maximum) of an `accepts` cell of a number setting; None otherwise."""
    match = re.fullmatch(rf"(whole, )?([0-9.]+){RANGE}([0-9.]+)", accepts)
    if match is None:
        return None
    return bool(match.group(1)), float(match.group(2)), float(match.group(3))


def test_every_documented_setting_is_in_the_catalog_with_its_default() -> None:
    documented = documented_settings()
    unknown = set(documented) - set(CATALOG)
    assert not unknown, f"docs/api.md documents settings corral lacks: {sorted(unknown)}"
    wrong = {
        name: (shown, CATALOG[name].default)
        for name, (shown, _) in documented.items()
        if not documented_default(name, shown)
    }
    assert not wrong, f"documented default vs the catalog's: {wrong}"


def test_every_catalog_setting_is_documented() -> None:
    missing = set(CATALOG) - set(documented_settings())
    assert not missing, f"settings docs/api.md does not list: {sorted(missing)}"


def test_documented_bounds_are_the_catalogs() -> None:
    """A number setting's `accepts` is its bounds (and `whole,` for a count); a document
    setting's says in words what its parser checks, so it is no number range."""
    for name, (_, accepts) in documented_settings().items():
        if (setting := CATALOG.get(name)) is None:
            continue  # an unknown setting is the test above's finding
        bounds = documented_bounds(accepts)
        if setting.parse is not None:
            assert bounds is None, f"{name} is checked by a parser, not bounds: {accepts}"
            continue
        assert bounds == (setting.whole, setting.minimum, setting.maximum), (
            f"{name}: docs say {accepts!r}, the catalog "
            f"{'whole, ' if setting.whole else ''}{setting.minimum:g}{RANGE}{setting.maximum:g}"
        )


# --- routes and actions -----------------------------------------------------------------

# A route's own literal for a type segment, `{type:(?i:tokens|token)}`: its first spelling.
LITERAL_PARAM = re.compile(r"\{[^}:]+:\(\?i:([^|)]+)[^)]*\)\}")
ANY_PARAM = re.compile(r"\{[^}]*\}")


def shape(path: str) -> str:
    """A path as a shape: lower-case, every parameter `{}` whatever it is named
    (`{id}`, `{cluster_id}`, `{namespace}:{name}`), a type segment its literal."""
    path = LITERAL_PARAM.sub(lambda m: m.group(1), path)
    segments = ["{}" if "{" in s else s for s in ANY_PARAM.sub("{}", path).split("/")]
    return "/".join(segments).lower()


def served_routes() -> set[tuple[str, str]]:
    """(method, shape) of every route the application serves (`create_app` adds these
    tables; the HEAD it also answers is aiohttp's for each GET, not in them)."""
    return {
        (route.method, shape(route.path))
        for module in ROUTE_MODULES
        for route in module.routes
        if isinstance(route, web.RouteDef)
    }


def served_actions() -> set[tuple[str, str, str]]:
    """(type, action, `resource` or `collection`) of every schema's actions."""
    found = set()
    for schema in SCHEMA_LIST:
        for name in schema.resource_actions:
            found.add((schema.plural.lower(), name, "resource"))
        for name in schema.collection_actions:
            found.add((schema.plural.lower(), name, "collection"))
    return found


def headings_and_rows(text: str) -> list[tuple[str, str]]:
    """(the `##` heading above it, the line) of every route table row."""
    heading, found = "", []
    for line in text.splitlines():
        if line.startswith("## "):
            heading = line
        elif line.startswith("| ") and cells(line)[0] in METHODS | {ANY}:
            found.append((heading, line))
    return found


def resolve(path: str, heading: str) -> str:
    """A row's `…/x` is relative to its section: the heading's first path without its last
    segment (`## Nodes (`/v3/clusters/{cluster_id}/nodes`)`: `/v3/clusters/{cluster_id}`)."""
    if not path.startswith("…"):
        return path
    base = re.search(r"`(/[^`]+)`", heading)
    assert base, f"{path} is relative, but {heading!r} names no path"
    return base.group(1).rsplit("/", 1)[0] + path[1:]


def documented() -> tuple[set[tuple[str, str]], set[tuple[str, str, str]]]:
    """(method, shape) of every row of docs/api.md's route tables, and (type, action, scope)
    of each action they name (`?action=pause` / `resume`: both)."""
    routes, actions = set(), set()
    for heading, line in headings_and_rows(API_DOC):
        method, where = cells(line)[:2]
        method = "*" if method == ANY else method
        quoted = re.findall(r"`([^`]+)`", where)
        paths = [q for q in quoted if q.startswith(("/", "…"))]
        assert paths, f"a route row without a path: {line}"
        more = [q for q in quoted if re.fullmatch(r"[A-Za-z]+", q)]
        for path in paths:
            full, _, query = resolve(path, heading).partition("?action=")
            routes.add((method, shape(full)))
            if not query:
                continue
            for name in [query, *more]:
                segments = shape(full).split("/")
                scope = "resource" if segments[-1] == "{}" else "collection"
                kind = next(s for s in reversed(segments) if s != "{}")
                if (shape(full), name) not in ROUTE_ACTIONS:
                    actions.add((kind, name, scope))
    return routes, actions


def test_every_documented_route_is_served() -> None:
    routes, _ = documented()
    missing = routes - served_routes()
    assert not missing, f"docs/api.md lists routes nobody serves: {sorted(missing)}"


def test_every_served_route_is_documented() -> None:
    routes, _ = documented()
    missing = served_routes() - routes
    assert not missing, f"served routes docs/api.md's tables lack: {sorted(missing)}"


def test_every_documented_action_is_in_a_schema() -> None:
    _, actions = documented()
    missing = actions - served_actions()
    assert not missing, f"docs/api.md lists actions no schema has: {sorted(missing)}"


def test_every_schema_action_is_documented() -> None:
    _, actions = documented()
    missing = served_actions() - actions
    assert not missing, f"actions docs/api.md's tables lack: {sorted(missing)}"


def test_route_actions_are_served() -> None:
    """The exceptions above are real: their path takes a POST."""
    posts = {p for m, p in served_routes() if m == "POST"}
    assert {p for p, _ in ROUTE_ACTIONS} <= posts
