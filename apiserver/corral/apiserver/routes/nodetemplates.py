"""`/v3/nodetemplates` (spec 2.6, 4.4): which machine a node pool makes, with which driver.

A template is a cluster-scoped `NodeTemplate` named `nt-xxxxx` (its id), belonging to its
creator (`services.owned`). Its `<driver>Config` is checked against the schema its driver
declared (`corral.core.drivers.templates`); the driver must be active and ready when a
template names it or changes its config. `cloudCredentialName` names a credential of the
template's owner for the same driver, which must set the driver's required secret fields.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import or_empty, read_json, text
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import name_of, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import owned
from corral.core import errors
from corral.core.api import ids
from corral.core.api.ids import ScopedId
from corral.core.auth import ownership
from corral.core.clusters import taints
from corral.core.drivers import templates
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

SCHEMA = Schema(
    id="nodeTemplate",
    plural="nodeTemplates",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "displayName": Field("string", create=True, update=True),
        "description": Field("string", create=True, update=True),
        "driver": Field("reference[nodeDriver]", create=True,
                        description="Immutable; given, or taken from the one <driver>Config"),
        "cloudCredentialName": Field("reference[cloudCredential]", create=True, update=True,
                                     description="A cloud credential of the template's owner "
                                                 "for the same driver"),
        "nodeTaints": Field("array[taint]", create=True, update=True),
        "creatorId": readonly("reference[user]"),
        "state": readonly("enum", "active or removing"),
        "transitioning": readonly("enum"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
)  # fmt: skip

routes = web.RouteTableDef()


def fields(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    driver = spec.get("driver", "")
    return {
        "id": name_of(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "driver": driver,
        "cloudCredentialName": spec.get("cloudCredentialName", ""),
        "nodeTaints": spec.get("nodeTaints") or [],
        templates.config_field(driver): spec.get("config") or {},
        "creatorId": ownership.owner_of(obj),
        "state": "removing" if obj["metadata"].get("deletionTimestamp") else "active",
        "transitioning": "no",
        **object_stamp(obj),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    base = base_url(request)
    links = {"nodeDriver": f"{base}/v3/nodedrivers/{obj['spec']['driver']}"}
    if credential := obj["spec"].get("cloudCredentialName"):
        links["cloudCredential"] = f"{base}/v3/cloudcredentials/{credential}"
    return envelope.resource(base, SCHEMA, fields(obj), links=links)


def found(request: web.Request) -> Obj:
    return owned.visible(
        caller(request),
        request.app[DEPS].stores.nodetemplates,
        request.match_info["id"],
        "nodeTemplate",
    )


@routes.get(v3("nodetemplates"))
async def list_templates(request: web.Request) -> web.Response:
    mine = owned.listed(caller(request), request.app[DEPS].stores.nodetemplates)
    body = envelope.collection(
        base_url(request), SCHEMA, mine,
        name_of, fields, lambda o: render(request, o), request.query, request.path,
        can_create=True,
    )  # fmt: skip
    return web.json_response(body)


@routes.get(v3("nodetemplates", "/{id}"))
async def get_template(request: web.Request) -> web.Response:
    return web.json_response(render(request, found(request)))


@routes.post(v3("nodetemplates"))
async def create_template(request: web.Request) -> web.Response:
    body = await read_json(request)
    if body.get("type", SCHEMA.id) != SCHEMA.id:
        raise errors.invalid("type", f"type must be {SCHEMA.id}")
    driver = driver_of(body, current=None)
    schema = owned.driver_schema(deps(request), driver, "driver", active=True)
    field = templates.config_field(driver)
    spec: dict[str, Any] = {
        "driver": driver,
        "config": templates.check_config(schema, or_empty(body.get(field), {}), field),
        **owned.described(body),
    }
    if "nodeTaints" in body:
        spec["nodeTaints"] = taints.parse(or_empty(body["nodeTaints"], []), "nodeTaints")
    credential = text(body, "cloudCredentialName", max_length=63)
    check_credential(request, schema, driver, principal(request).user_id, credential)
    if credential:
        spec["cloudCredentialName"] = credential
    metadata = ObjectMeta(
        name=ids.generate("nt"), **owned.ownership_metadata(deps(request), caller(request))
    )
    template = kinds.NodeTemplate(metadata=metadata, spec=spec)
    created = as_dict(await request.app[DEPS].kube.create(template))
    request.app[DEPS].stores.nodetemplates.put(created)
    return web.json_response(render(request, created), status=201)


def driver_of(body: dict[str, Any], current: str | None) -> str:
    """The driver the body names, as `driver` or by its one `<driver>Config`; both must agree
    with each other and, for a template that exists, with its driver (which cannot change)."""
    named = text(body, "driver", max_length=63)
    by_config = templates.driver_in(body, templates.CONFIG_SUFFIX)
    for given, field in ((named, "driver"), (by_config, f"{by_config}Config")):
        if current and given and given != current:
            raise errors.invalid(field, f"the driver of a template cannot change (it is "
                                        f"{current})", "InvalidAction")  # fmt: skip
    if named and by_config and named != by_config:
        raise errors.invalid(f"{by_config}Config", f"driver is {named}: its configuration is "
                                                   f"{named}Config")  # fmt: skip
    driver = current or named or by_config
    if not driver:
        raise errors.missing("driver")
    return driver


def check_credential(
    request: web.Request, schema: dict[str, Any], driver: str, owner: str, name: str
) -> None:
    """A template of `owner` may name only a credential of `owner` for `driver`, and must name
    one that sets the driver's required secret fields. One `owner` does not see is refused as
    one that does not exist."""
    if not name:
        if needed := templates.missing(schema, ()):
            message = f"driver {driver} needs a cloud credential setting {', '.join(needed)}"
            raise errors.invalid("cloudCredentialName", message, "MissingRequired")
        return
    credential = request.app[DEPS].stores.cloudcredentials.get(name)
    if credential is None or ownership.owner_of(credential) != owner:
        raise errors.invalid("cloudCredentialName", f"cloud credential {name} not found",
                             "InvalidReference")  # fmt: skip
    spec = credential.get("spec") or {}
    if spec.get("driver") != driver:
        raise errors.invalid("cloudCredentialName", f"cloud credential {name} is for driver "
                             f"{spec.get('driver')}, not {driver}", "InvalidReference")  # fmt: skip
    if needed := templates.missing(schema, spec.get("fields") or ()):
        raise errors.invalid("cloudCredentialName", f"cloud credential {name} does not set "
                             f"{', '.join(needed)}", "MissingRequired")  # fmt: skip


@routes.put(v3("nodetemplates", "/{id}"))
async def update_template(request: web.Request) -> web.Response:
    """Replaces what the body gives; `<driver>Config` as a whole (checked again, defaults
    filled), so a field left out of it goes back to its default."""
    obj = found(request)
    body = await read_json(request)
    current = obj["spec"]
    driver = driver_of(body, current["driver"])
    field = templates.config_field(driver)
    spec: dict[str, Any] = owned.described(body)
    if "nodeTaints" in body:
        spec["nodeTaints"] = taints.parse(or_empty(body["nodeTaints"], []), "nodeTaints")
    changes_credential = "cloudCredentialName" in body
    if field in body or changes_credential:
        schema = owned.driver_schema(deps(request), driver, "driver", active=field in body)
        if field in body:
            spec["config"] = templates.check_config(schema, or_empty(body[field], {}), field)
        if changes_credential:
            name = text(body, "cloudCredentialName", max_length=63)
            check_credential(request, schema, driver, ownership.owner_of(obj), name)
            spec["cloudCredentialName"] = name
    if not spec:
        return web.json_response(render(request, obj))
    # `add` replaces a member that is there: config is replaced whole, not merged.
    patch = [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in spec.items()]
    patched = as_dict(await request.app[DEPS].kube.patch(
        kinds.NodeTemplate, name_of(obj), patch, patch_type=PatchType.JSON
    ))  # fmt: skip
    request.app[DEPS].stores.nodetemplates.put(patched)
    return web.json_response(render(request, patched))


@routes.delete(v3("nodetemplates", "/{id}"))
async def delete_template(request: web.Request) -> web.Response:
    obj = found(request)
    if pools := request.app[DEPS].stores.nodepools.by_index("template", name_of(obj)):
        raise ApiError(409, "Conflict", in_use(request, name_of(obj), pools))
    # A pool that moved to another template keeps machines made from this one: removing them
    # needs its driver config and credential.
    if machines := request.app[DEPS].stores.nodes.by_index("template", name_of(obj)):
        raise ApiError(409, "Conflict", f"node template {name_of(obj)} is still used by "
                                        f"{len(machines)} machine(s) of node pools")  # fmt: skip
    await delete_if_present(request.app[DEPS].kube, kinds.NodeTemplate, name_of(obj))
    request.app[DEPS].stores.nodetemplates.forget(name_of(obj))
    return web.Response(status=204)


def in_use(request: web.Request, template: str, pools: list[Obj]) -> str:
    """Why the template cannot go: the pools using it the caller sees, and how many others
    (an administrator may have used it in a cluster its owner does not see)."""
    allowed = access(request)
    shown = sorted(str(ScopedId.of(p)) for p in pools
                   if allowed.cluster_role(p["metadata"]["namespace"]) is not None)  # fmt: skip
    hidden = len(pools) - len(shown)
    named = ", ".join(shown + ([f"{hidden} other(s)"] if hidden else []))
    return f"node template {template} is used by node pools {named}"
