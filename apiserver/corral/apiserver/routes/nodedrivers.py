"""`/v3/nodedrivers` (spec 2.7, 4.4): every authenticated user may read the drivers (node
templates name them); only administrators create, change, (de)activate and delete them.

A driver's name is the key node templates use (`<name>Config`), so it is a short lowercase
word: given as `name`, or derived from `displayName`, else from the url's file name
(`docker-machine-driver-foo` or `corral-driver-foo` give `foo`). What a driver is doing
(downloaded, checked, asked for its schema) is the operator's: its conditions and `state`.
Why a step failed, and the digest of the file, are shown to administrators alone.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authn import Principal, principal
from corral.apiserver.auth.authz import require_admin
from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import description_text, flag, name_text, read_json, text
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import name_of, object_fields, object_stamp
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
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
ACTIONS = ("activate", "deactivate")

SCHEMA = Schema(
    id="nodeDriver",
    plural="nodeDrivers",
    fields={
        "name": Field("string", create=True,
                      description="The driver's name (templates carry <name>Config): "
                                  "a lowercase letter then letters or digits, at most 57"),
        "displayName": Field("string", create=True, update=True,
                             description="At most 57 characters"),
        "description": Field("string", create=True, update=True),
        "url": Field("string", create=True, update=True, required=True,
                     description="https://, http:// or file:/// location of the executable"),
        "checksum": Field("string", create=True, update=True,
                          description="Hex md5, sha1, sha256 or sha512 (by length); empty: "
                                      "no check"),
        "active": Field("boolean", create=True, update=True, required=True),
        "builtin": readonly("boolean"),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={name: {} for name in ACTIONS},
)  # fmt: skip

routes = web.RouteTableDef()


def fields(obj: Obj) -> dict[str, Any]:
    """The resource's fields short of metadata, spec and status: small, so collections
    filter and sort by them."""
    spec = obj.get("spec") or {}
    current, transitioning, message = driver_status.state(obj)
    return {
        "id": name_of(obj),
        "name": name_of(obj),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "url": spec.get("url", ""),
        "checksum": spec.get("checksum", ""),
        "active": spec.get("active") is True,
        "builtin": spec.get("builtin") is True,
        "state": current,
        "transitioning": transitioning,
        "transitioningMessage": message,
        **object_stamp(obj),
    }


def shown(obj: Obj, who: Principal) -> Obj:
    """The driver as `who` may see it: why a download failed and the digest of what was
    fetched are for administrators (`driver_status.for_everyone`)."""
    return obj if who.is_admin else driver_status.for_everyone(obj)


def render(request: web.Request, obj: Obj, who: Principal) -> dict[str, Any]:
    obj = shown(obj, who)
    body = {**fields(obj), **object_fields(obj, ("name", "creationTimestamp", "uid", "generation"))}
    offered: list[str] = []
    if who.is_admin:
        offered = ["deactivate" if body["active"] else "activate"]
    rendered = envelope.resource(base_url(request), SCHEMA, body, actions=offered)
    if not who.is_admin:
        rendered["links"].pop("update", None)
        rendered["links"].pop("remove", None)
    return rendered


def found(request: web.Request) -> Obj:
    name = request.match_info["id"]
    obj = request.app[DEPS].stores.nodedrivers.get(name)
    if obj is None:
        raise errors.not_found(f"nodeDriver {name} not found")
    return obj


@routes.get(v3("nodedrivers"))
async def list_drivers(request: web.Request) -> web.Response:
    who = principal(request)
    # Shown before filtering, so that no filter matches on what the caller may not see.
    drivers = [shown(o, who) for o in request.app[DEPS].stores.nodedrivers.all()]
    body = envelope.collection(base_url(request), SCHEMA, drivers, name_of, fields,
                               lambda o: render(request, o, who), request.query, request.path,
                               can_create=who.is_admin)  # fmt: skip
    return web.json_response(body)


@routes.get(v3("nodedrivers", "/{id}"))
async def get_driver(request: web.Request) -> web.Response:
    return web.json_response(render(request, found(request), principal(request)))


@routes.post(v3("nodedrivers"))
async def create_driver(request: web.Request) -> web.Response:
    who = principal(request)
    if "action" in request.query:
        raise ApiError(422, "InvalidAction", "actions act on one driver: /v3/nodedrivers/{id}")
    require_admin(who, "create node drivers")
    raw = await read_json(request)
    if raw.get("type", "nodeDriver") != "nodeDriver":
        raise errors.invalid("type", "type must be nodeDriver")
    if raw.get("builtin") is True:
        raise errors.invalid("builtin", "builtin drivers are corral's own", code="InvalidOption")
    body = SCHEMA.writable(raw, creating=True)
    spec = updatable_spec(body, request.app[DEPS].driver_files)
    for required in ("url", "active"):
        if required not in spec:
            raise errors.missing(required)
    name = name_for(body, spec)
    driver = kinds.NodeDriver(metadata=ObjectMeta(name=name), spec={"builtin": False, **spec})
    created = as_dict(await request.app[DEPS].kube.create(driver))
    request.app[DEPS].stores.nodedrivers.put(created)
    return web.json_response(render(request, created, who), status=201)


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


@routes.put(v3("nodedrivers", "/{id}"))
async def update_driver(request: web.Request) -> web.Response:
    who = principal(request)
    obj = found(request)
    require_admin(who, "change node drivers")
    body = SCHEMA.writable(await read_json(request), creating=False)
    spec = updatable_spec(body, request.app[DEPS].driver_files)
    current = obj.get("spec") or {}
    if current.get("builtin"):
        for field in ("url", "checksum"):
            if field in spec and spec[field] != current.get(field, ""):
                raise errors.invalid(field, f"the {field} of a builtin driver cannot change",
                                     code="InvalidAction")  # fmt: skip
    return web.json_response(render(request, await _patch(request, obj, spec), who))


async def _patch(request: web.Request, obj: Obj, spec: dict[str, Any]) -> Obj:
    if not spec:
        return obj
    patched = as_dict(await request.app[DEPS].kube.patch(
        kinds.NodeDriver, name_of(obj), {"spec": spec}, patch_type=PatchType.MERGE
    ))  # fmt: skip
    request.app[DEPS].stores.nodedrivers.put(patched)
    return patched


@routes.post(v3("nodedrivers", "/{id}"))
async def driver_action(request: web.Request) -> web.Response:
    who = principal(request)
    obj = found(request)
    name = action(request, set(ACTIONS))
    if name is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a node driver needs ?action=<name>")
    require_admin(who, f"{name} node drivers")
    await read_json(request)
    return web.json_response(
        render(request, await _patch(request, obj, {"active": name == "activate"}), who)
    )


@routes.delete(v3("nodedrivers", "/{id}"))
async def delete_driver(request: web.Request) -> web.Response:
    who = principal(request)
    obj = found(request)
    require_admin(who, "delete node drivers")
    if (obj.get("spec") or {}).get("builtin"):
        message = f"the builtin driver {name_of(obj)} cannot be deleted; deactivate it"
        raise ApiError(405, "MethodNotAllowed", message)
    used = sorted(
        name_of(t) for t in request.app[DEPS].stores.nodetemplates.by_index("driver", name_of(obj))
    )
    if used:
        message = f"node driver {name_of(obj)} is used by node templates {', '.join(used)}"
        raise ApiError(409, "Conflict", message)
    await delete_if_present(request.app[DEPS].kube, kinds.NodeDriver, name_of(obj))
    request.app[DEPS].stores.nodedrivers.forget(name_of(obj))
    return web.Response(status=204)
