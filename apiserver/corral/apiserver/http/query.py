"""What a request asks for in its query: an action, a label selector."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web

from corral.apiserver.http.errors import ApiError


def action(request: web.Request, allowed: set[str]) -> str | None:
    name = request.query.get("action")
    if name is not None and name not in allowed:
        raise ApiError(422, "InvalidAction", f"Invalid action: {name}")
    return name


def label_selector(selector: str) -> Callable[[Mapping[str, str]], bool]:
    """An equality-based label selector (`k=v,k==v,k2!=v2,k3,!k4`) as a predicate."""
    terms: list[tuple[str, str, str]] = []
    for term in filter(None, (t.strip() for t in selector.split(","))):
        for operator in ("!=", "==", "="):
            if operator in term:
                key, value = (part.strip() for part in term.split(operator, 1))
                terms.append(("!=" if operator == "!=" else "=", key, value))
                break
        else:
            terms.append(("!", term[1:].strip(), "") if term.startswith("!") else ("?", term, ""))

    def matches(labels: Mapping[str, str]) -> bool:
        for operator, key, value in terms:
            if operator == "=" and labels.get(key) != value:
                return False
            if operator == "!=" and labels.get(key) == value:
                return False
            if operator == "!" and key in labels:
                return False
            if operator == "?" and key not in labels:
                return False
        return True

    return matches
