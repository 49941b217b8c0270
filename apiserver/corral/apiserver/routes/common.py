"""Small helpers the route modules share."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from corral.apiserver import errors
from corral.apiserver.keys import EXTERNAL_URL
from corral.core.auth import ttl
from corral.core.kube.informer import Obj


def v3(plural: str, rest: str = "") -> str:
    """A /v3 route whose type name matches in any case (`globalRoleBindings` as well)."""
    return f"/v3/{{type:(?i:{plural})}}{rest}"


def base_url(request: web.Request) -> str:
    """The configured external URL: a Host header is the client's to choose, so it never
    reaches a link or a kubeconfig."""
    return request.app[EXTERNAL_URL]


def name_of(obj: Obj) -> str:
    """The id of a resource backed by an object outside any namespace: its name."""
    name: str = obj["metadata"]["name"]
    return name


def meta_fields(obj: Obj) -> dict[str, Any]:
    """The metadata every resource shows: id, creation time, uid."""
    meta = obj["metadata"]
    return {
        "id": name_of(obj),
        "created": ttl.format_time(ttl.parse_time(meta["creationTimestamp"])),
        "uuid": meta.get("uid", ""),
    }


def object_stamp(obj: Obj) -> dict[str, Any]:
    """A custom resource's creation time and uid, as the resource backed by it shows them."""
    meta = obj["metadata"]
    return {"created": meta.get("creationTimestamp", ""), "uuid": meta.get("uid", "")}


def object_fields(obj: Obj, metadata: tuple[str, ...]) -> dict[str, Any]:
    """What a resource backed by a custom resource shows of it after its own fields and stamp:
    the named metadata keys, spec and status."""
    meta = obj["metadata"]
    return {
        "metadata": {k: meta[k] for k in metadata if k in meta},
        "spec": obj.get("spec") or {},
        "status": obj.get("status") or {},
    }


def text(body: dict[str, Any], field: str, max_length: int = 1024, required: bool = False) -> str:
    value = body.get(field, "")
    if value is None:
        value = ""
    if not isinstance(value, str) or len(value) > max_length:
        raise errors.invalid(field, f"{field} must be text of at most {max_length} characters")
    if required and not value:
        raise errors.missing(field)
    return value


def either(body: dict[str, Any], fields: tuple[str, str], max_length: int) -> str:
    """A required text given under its `/v3` name or its stored name (`clusterId` or
    `clusterName`)."""
    value = text(body, fields[0], max_length) or text(body, fields[1], max_length)
    if not value:
        raise errors.missing(fields[0])
    return value


def referenced(find: Callable[[], Obj], field: str, what: str) -> Obj:
    """An object a body names: one the caller cannot see is an invalid reference, exactly as
    one that does not exist."""
    try:
        return find()
    except errors.ApiError:
        raise errors.invalid(field, f"{what} not found", "InvalidReference") from None


def flag(body: dict[str, Any], field: str, default: bool) -> bool:
    value = body.get(field, default)
    if not isinstance(value, bool):
        raise errors.invalid(field, f"{field} must be true or false")
    return value


def action(request: web.Request, allowed: set[str]) -> str | None:
    name = request.query.get("action")
    if name is not None and name not in allowed:
        raise errors.ApiError(422, "InvalidAction", f"Invalid action: {name}")
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
