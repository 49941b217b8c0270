"""Node drivers: every authenticated user reads them (node templates name them); only
administrators create, change, (de)activate and delete them.

A driver's name is the key node templates use (`<name>Config`), so it is a short lowercase
word: given as `name`, or derived from `displayName`, else from the url's file name
(`docker-machine-driver-foo` or `corral-driver-foo` give `foo`). Why a step failed, and the
digest of the file, are shown to administrators alone.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller, require_admin
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, flag, name_text, text
from corral.apiserver.http.objects import name_of
from corral.core import errors
from corral.core.drivers import source
from corral.core.drivers import status as driver_status
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

MAX_DISPLAY_NAME = 57  # spec 8
NAME = re.compile(r"[a-z][a-z0-9]{0,56}")
# Prefixes of a driver executable's file name that say what it is, not which driver.
FILE_PREFIXES = ("docker-machine-driver-", "corral-driver-")


def shown(who: Caller, obj: Obj) -> Obj:
    """The driver as `who` may see it: why a download failed and the digest of what was
    fetched are for administrators (`driver_status.for_everyone`)."""
    return obj if who.is_admin else driver_status.for_everyone(obj)


def listed(deps: Deps, who: Caller) -> list[Obj]:
    # Shown before filtering, so that no filter matches on what the caller may not see.
    return [shown(who, o) for o in deps.stores.nodedrivers.all()]


def find(deps: Deps, who: Caller, name: str) -> Obj | None:
    obj = deps.stores.nodedrivers.get(name)
    return None if obj is None else shown(who, obj)


def check_create(who: Caller, with_action: bool) -> None:
    """Before the body is read: an action names one driver, and only administrators create."""
    if with_action:
        raise errors.Invalid("actions act on one driver: /v3/nodedrivers/{id}",
                             code="InvalidAction")  # fmt: skip
    require_admin(who, "create node drivers")


def check_kind(body: dict[str, Any]) -> None:
    """What a create's body may not say, although no schema field names it."""
    if body.get("type", "nodeDriver") != "nodeDriver":
        raise errors.invalid("type", "type must be nodeDriver")
    if body.get("builtin") is True:
        raise errors.invalid("builtin", "builtin drivers are corral's own", code="InvalidOption")


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    """`body` holds the schema's creatable fields only."""
    require_admin(who, "create node drivers")
    spec = updatable_spec(body, deps.driver_files)
    for required in ("url", "active"):
        if required not in spec:
            raise errors.missing(required)
    name = name_for(body, spec)
    driver = kinds.NodeDriver(metadata=ObjectMeta(name=name), spec={"builtin": False, **spec})
    created = as_dict(await deps.kube.create(driver))
    deps.stores.nodedrivers.put(created)
    return created


def may_change(who: Caller) -> None:
    require_admin(who, "change node drivers")


async def update(deps: Deps, who: Caller, obj: Obj, body: dict[str, Any]) -> Obj:
    """`body` holds the schema's changeable fields only; a builtin driver keeps its file."""
    may_change(who)
    current = obj.get("spec") or {}
    if current.get("builtin"):
        # Given as shown (a driver read and put back), they are no change.
        for field in ("url", "checksum"):
            if field in body and body[field] != current.get(field, ""):
                raise errors.invalid(field, f"the {field} of a builtin driver cannot change",
                                     code="InvalidAction")  # fmt: skip
        body = {k: v for k, v in body.items() if k not in ("url", "checksum")}
    return await _patch(deps, obj, updatable_spec(body, deps.driver_files))


def may_activate(who: Caller, action: str) -> None:
    require_admin(who, f"{action} node drivers")


async def activate(deps: Deps, who: Caller, obj: Obj, action: str) -> Obj:
    """`activate` or `deactivate`."""
    may_activate(who, action)
    return await _patch(deps, obj, {"active": action == "activate"})


def may_delete(who: Caller, obj: Obj) -> None:
    """A builtin driver is deactivated, never deleted."""
    require_admin(who, "delete node drivers")
    if (obj.get("spec") or {}).get("builtin"):
        raise errors.Unsupported(
            f"the builtin driver {name_of(obj)} cannot be deleted; deactivate it"
        )


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    """A driver that templates name stays."""
    may_delete(who, obj)
    name = name_of(obj)
    used = sorted(name_of(t) for t in deps.stores.nodetemplates.by_index("driver", name))
    if used:
        raise errors.Conflict(f"node driver {name} is used by node templates {', '.join(used)}",
                              code="Conflict")  # fmt: skip
    await delete_if_present(deps.kube, kinds.NodeDriver, name)
    deps.stores.nodedrivers.forget(name)


def updatable_spec(body: dict[str, Any], files: str | None) -> dict[str, Any]:
    """The spec fields the body sets, each checked; a field it leaves out is not there.
    `files` is the directory file urls may read below (None: they are refused)."""
    spec: dict[str, Any] = {}
    if "displayName" in body:
        spec["displayName"] = name_text(body, "displayName", max_length=MAX_DISPLAY_NAME)
    if "description" in body:
        spec["description"] = description_text(body)
    if "url" in body:
        url = source.check_url(text(body, "url", max_length=source.MAX_URL_LENGTH))
        if urlsplit(url).scheme == "file":
            # The API server may not see the operator's files: `..` is resolved here, symbolic
            # links by the operator, which checks again before it reads.
            source.check_file(source.file_path(url), files)
        spec["url"] = url
    if "checksum" in body:
        checksum = text(body, "checksum", max_length=128).strip()
        source.algorithm(checksum)
        spec["checksum"] = checksum.lower()
    if "active" in body:
        spec["active"] = flag(body, "active", False)
    return spec


def name_for(body: dict[str, Any], spec: dict[str, Any]) -> str:
    given = text(body, "name", max_length=63)
    if given:
        if not NAME.fullmatch(given):
            raise errors.invalid("name", "name must be a lowercase letter followed by lowercase "
                                         "letters or digits, at most 57 in all")  # fmt: skip
        return given
    for candidate in (spec.get("displayName", ""), _file_name(spec["url"])):
        derived = re.sub(r"[^a-z0-9]", "", candidate.lower()).lstrip("0123456789")[:57]
        if derived:
            return derived
    raise errors.missing("name")


def _file_name(url: str) -> str:
    base = unquote(urlsplit(url).path).rsplit("/", 1)[-1]
    for prefix in FILE_PREFIXES:
        if base.startswith(prefix):
            return re.split(r"[-_.]", base[len(prefix) :], maxsplit=1)[0]
    return base.split(".", 1)[0]


async def _patch(deps: Deps, obj: Obj, spec: dict[str, Any]) -> Obj:
    if not spec:
        return obj
    patched = as_dict(await deps.kube.patch(
        kinds.NodeDriver, name_of(obj), {"spec": spec}, patch_type=PatchType.MERGE
    ))  # fmt: skip
    deps.stores.nodedrivers.put(patched)
    return patched
