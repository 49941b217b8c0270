"""docs/api.md's table of error codes is the one the code answers with: every `code` the API
server or a core rule can put in an error body is a row, with each status it comes with, and
every row is a code the source still uses.

The codes are read from the source itself (its syntax tree, not a list kept here): the
`ApiError(status, code, …)` it raises, the core errors it raises with a `code` (their status
is their kind's, `http/errors.py`), the status-to-code tables it keeps, and the kinds' own
codes.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from corral.apiserver.http.errors import _CORE_KINDS
from corral.core import errors

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (ROOT / "apiserver" / "corral", ROOT / "core" / "corral")
DOC = ROOT / "docs" / "api.md"
CODE = re.compile(r"[A-Z][a-z]+(?:[A-Z][a-zA-Z]*)+|Unauthorized|Forbidden|Conflict|Gone|Timeout")
STATUS_OF_KIND = {kind.__name__: status for kind, (status, _) in _CORE_KINDS.items()}
# The helpers of `corral.core.errors` that take a code, and where: `invalid(field, message,
# code)`; the others give their kind's code or one of their own, raised in errors.py itself.
HELPERS = {"invalid": (STATUS_OF_KIND["Invalid"], 2)}
Found = tuple[int | None, str]


def files() -> Iterator[Path]:
    for source in SOURCES:
        yield from sorted(source.rglob("*.py"))


def trees() -> list[ast.Module]:
    return [ast.parse(path.read_text(), str(path)) for path in files()]


def name_of(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def constants(modules: list[ast.Module]) -> dict[str, str]:
    """Module-level text constants (`UNKNOWN_FIELD = "InvalidBodyContent"`), by name."""
    found = {}
    for module in modules:
        for node in module.body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = node.value.value
    return found


def kinds_of_classes(modules: list[ast.Module]) -> dict[str, int]:
    """Every exception class of the source that is one of the core kinds: its status."""
    bases = {
        node.name: [name_of(base) for base in node.bases]
        for module in modules
        for node in ast.walk(module)
        if isinstance(node, ast.ClassDef)
    }

    def status(name: str, seen: frozenset[str] = frozenset()) -> int | None:
        if name in STATUS_OF_KIND:
            return STATUS_OF_KIND[name]
        for base in bases.get(name, []):
            if base not in seen and (found := status(base, seen | {name})) is not None:
                return found
        return None

    return {name: s for name in bases if (s := status(name)) is not None}


def codes_in_source() -> set[Found]:
    modules = trees()
    named = constants(modules)
    classes = {**kinds_of_classes(modules), **STATUS_OF_KIND}

    def text(node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in named:
            return named[node.id]
        return None

    found: set[Found] = set()
    for module in modules:
        for cls in [n for n in ast.walk(module) if isinstance(n, ast.ClassDef)]:
            for node in ast.walk(cls):
                # `super().__init__(message, field, code)` in an error class of a core kind.
                if (
                    isinstance(node, ast.Call)
                    and name_of(node.func) == "__init__"
                    and cls.name in classes
                    and len(node.args) > 2
                    and (code := text(node.args[2]))
                ):
                    found.add((classes[cls.name], code))
        for node in ast.walk(module):
            if (
                isinstance(node, ast.Dict)
                and node.keys
                and all(isinstance(k, ast.Constant) and isinstance(k.value, int) for k in node.keys)
            ):
                pairs = [(k.value, text(v)) for k, v in zip(node.keys, node.values, strict=True)]  # type: ignore[union-attr]
                if all(code and CODE.fullmatch(code) for _, code in pairs):
                    found |= {(status, code) for status, code in pairs if code}
            if not isinstance(node, ast.Call):
                continue
            func = name_of(node.func)
            # `{400: "BadRequest", …}.get(status, "ClusterError")`: the fallback.
            if (
                func == "get"
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Dict)
                and len(node.args) == 2
                and (code := text(node.args[1])) is not None
            ):
                found.add((None, code))
            if func == "ApiError" and len(node.args) > 1 and (code := text(node.args[1])):
                status = node.args[0]
                known = status.value if isinstance(status, ast.Constant) else None
                found.add((known if isinstance(known, int) else None, code))
            if func in classes or func in HELPERS:
                status, position = (classes[func], 2) if func in classes else HELPERS[func]
                given = [kw.value for kw in node.keywords if kw.arg == "code"]
                if len(node.args) > position:
                    given.append(node.args[position])
                for value in given:
                    if (code := text(value)) and CODE.fullmatch(code):
                        found.add((status, code))
    found |= {(status, code) for status, code in _CORE_KINDS.values()}
    return found


def documented() -> dict[str, set[int]]:
    """The rows of the table under "## Errors": code, then its statuses."""
    section = DOC.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[int]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        code = cells[0].strip("`") if len(cells) >= 2 else ""
        statuses = {int(s) for s in re.findall(r"\b[1-5]\d\d\b", cells[1])} if code else set()
        if CODE.fullmatch(code) and statuses:
            table[code] = statuses
    return table


def test_the_scan_finds_codes_of_every_kind_of_source() -> None:
    """What the scan must see, one of each way a code is written, so that a scan that
    finds nothing cannot pass the test below."""
    found = codes_in_source()
    assert (400, "InvalidBodyContent") in found  # ApiError(400, …) in http/body.py
    assert (422, errors.UNKNOWN_FIELD) in found  # a constant, through errors.unknown
    assert (422, "InvalidReference") in found  # errors.invalid(…, "InvalidReference")
    assert (409, "Conflict") in found  # errors.Conflict(…, code="Conflict")
    assert (429, "TooManyRequests") in found  # a status-to-code table
    assert (503, "ClusterUnavailable") in found  # a kind's own code
    assert (None, "ClusterError") in found  # a table's fallback


def test_every_code_the_source_answers_with_is_in_the_table_with_its_status() -> None:
    table = documented()
    for status, code in sorted(codes_in_source(), key=str):
        assert code in table, f"{code} is not in docs/api.md's table of error codes"
        if status is not None:
            assert status in table[code], f"{code} comes with {status}: not in its row"


def test_every_code_in_the_table_is_one_the_source_uses() -> None:
    used = {code for _, code in codes_in_source()}
    assert set(documented()) <= used, set(documented()) - used
