"""docs/architecture.md is a newcomer's map of the code; these checks keep it one (issue #22).

A map that names a module which is gone, or misses one that came, sends a reader the wrong way,
and nobody notices by reading. So: the map names every package and module of corral's import
packages (`__init__.py` and `__main__.py` apart: a package's own heading stands for them),
every path the doc names exists, and the layers section names every import-linter contract
and the contract's list of pure core modules.

The doc writes short paths: `core/api/ids.py` is the module `corral.core.api.ids`, in the file
core/corral/core/api/ids.py (the distribution spreads `corral` over several roots). A path
such as `tools/devkube/` or `crds/…` is read from the repository's root.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"

# The first segment of a short path, and the folder that holds that import package.
SHORT_ROOTS = {
    "core": REPO / "core" / "corral" / "core",
    "operator": REPO / "operator" / "corral" / "operator",
    "apiserver": REPO / "apiserver" / "corral" / "apiserver",
    "agent": REPO / "agent" / "corral" / "agent",
    "devenv": REPO / "tools" / "devenv" / "corral" / "devenv",
}
# A backticked text starting with one of these (and holding a `/`) is a path and must exist.
PATH_HEADS = {*SHORT_ROOTS, "tools", "crds", "charts", "docs", "tests"}
NOT_MAPPED = {"__init__.py", "__main__.py"}

MAP_SECTION = "## The map"
LAYERS_SECTION = "## The layers"
PURE_CONTRACT = "pure core modules never import the Kubernetes adapter"

BACKTICKED = re.compile(r"`([^`\n]+)`")
# `### `core/api/`` opens a package's part of the map; its table's rows begin with a module.
PACKAGE_HEADING = re.compile(r"^#{3,4} `(?P<package>[a-z_]+(?:/[a-z_]+)*/)`")
MODULE_ROW = re.compile(r"^\| `(?P<module>[a-z_0-9]+\.py)` \|(?P<rest>.*)\|\s*$")


def doc() -> str:
    return DOC.read_text()


def section(text: str, heading: str) -> str:
    """The lines from `heading` to the next heading of its level."""
    start = text.find(f"\n{heading}")
    assert start != -1, f"docs/architecture.md has no section {heading!r}"
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def tree() -> tuple[set[str], set[str]]:
    """The packages (`core/api/`) and modules (`core/api/ids.py`) of the code, as short paths."""
    packages: set[str] = set()
    modules: set[str] = set()
    for short, folder in SHORT_ROOTS.items():
        for init in folder.rglob("__init__.py"):
            inner = init.parent.relative_to(folder).as_posix()
            packages.add(f"{short}/" if inner == "." else f"{short}/{inner}/")
        for file in folder.rglob("*.py"):
            if file.name not in NOT_MAPPED:
                modules.add(f"{short}/{file.relative_to(folder).as_posix()}")
    return packages, modules


def mapped() -> tuple[set[str], set[str], list[str]]:
    """The packages and modules the map names, and its rows that say nothing."""
    packages: set[str] = set()
    modules: set[str] = set()
    empty: list[str] = []
    package = None
    for line in section(doc(), MAP_SECTION).splitlines():
        if heading := PACKAGE_HEADING.match(line):
            package = heading["package"]
            packages.add(package)
        elif row := MODULE_ROW.match(line):
            assert package is not None, f"a module row before any package heading: {line}"
            modules.add(package + row["module"])
            if not row["rest"].strip(" |"):
                empty.append(package + row["module"])
    return packages, modules, empty


def resolve(token: str) -> Path:
    """The file or folder a path of the doc names: a short path first, else the repository's."""
    head, _, rest = token.partition("/")
    if head in SHORT_ROOTS and (SHORT_ROOTS[head] / rest).exists():
        return SHORT_ROOTS[head] / rest
    return REPO / token


def names_defined(module: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return found


def missing(token: str) -> bool:
    """Whether a path the doc names is not there. `core/kube/connections` names a module,
    `core/kube/status.StatusWriter` a module and something it defines."""
    if resolve(token).exists() or resolve(token + ".py").is_file():
        return False
    module, _, name = token.rpartition(".")
    file = resolve(module + ".py")
    return not (name.isidentifier() and file.is_file() and name in names_defined(file))


def contracts() -> list[dict[str, Any]]:
    with (REPO / "pyproject.toml").open("rb") as f:
        found: list[dict[str, Any]] = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return found


def dotted(token: str) -> str:
    """`core/api/` and `core/errors.py` as import-linter names them."""
    return "corral." + token.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_the_map_names_every_module() -> None:
    _, modules = tree()
    _, documented, _ = mapped()
    assert sorted(modules - documented) == []


def test_the_map_names_only_modules_that_exist() -> None:
    _, modules = tree()
    _, documented, _ = mapped()
    assert sorted(documented - modules) == []


def test_the_map_has_a_heading_per_package() -> None:
    packages, _ = tree()
    documented, _, _ = mapped()
    assert sorted(packages ^ documented) == []


def test_every_row_of_the_map_says_what_its_module_is_for() -> None:
    assert mapped()[2] == []


@pytest.mark.parametrize(
    "token",
    sorted(
        {
            token
            for token in BACKTICKED.findall(DOC.read_text())
            if "/" in token and token.partition("/")[0] in PATH_HEADS
        }
    ),
)
def test_every_path_the_doc_names_exists(token: str) -> None:
    assert not missing(token), f"{token} names nothing in the tree"


def test_the_doc_names_every_import_contract() -> None:
    text = " ".join(section(doc(), LAYERS_SECTION).split())
    assert [c["name"] for c in contracts() if c["name"] not in text] == []


def pure_core_parts() -> set[str]:
    """The parts cell of the layers table's row `pure core` (its last cell names what they
    may not import)."""
    rows = [
        line
        for line in section(doc(), LAYERS_SECTION).splitlines()
        if line.startswith("| pure core |")
    ]
    assert len(rows) == 1, "the layers table has one row `pure core`"
    parts = rows[0].split("|")[2]
    return {dotted(t) for t in BACKTICKED.findall(parts) if t.startswith("core/")}


def test_the_pure_core_of_the_doc_is_the_contract_s() -> None:
    (pure,) = [c for c in contracts() if c["name"] == PURE_CONTRACT]
    assert pure_core_parts() == set(pure["source_modules"])


def test_every_part_of_core_has_a_layer() -> None:
    """A part of core that is neither in the pure list nor named as an adapter has no rule."""
    table = section(doc(), LAYERS_SECTION)
    named = {dotted(t) for t in BACKTICKED.findall(table) if t.startswith("core/")}
    core = SHORT_ROOTS["core"]
    parts = {
        dotted(f"core/{p.name}")
        for p in core.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.name not in NOT_MAPPED)
    }
    assert sorted(parts - named) == []
