"""Node templates (spec 2.6, 4.4): which machine a node pool makes, with which driver.

A template is a cluster-scoped `NodeTemplate` named `nt-xxxxx` (its id), belonging to its
creator (`services.owned`). Its `<driver>Config` is checked against the schema its driver
declared (`corral.core.drivers.templates`); the driver must be active and ready when a
template names it or changes its config. `cloudCredentialName` names a credential of the
template's owner for the same driver, which must set the driver's required secret fields.
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import or_empty, text
from corral.apiserver.http.objects import name_of
from corral.apiserver.services import owned
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.auth import ownership
from corral.core.clusters import taints
from corral.core.drivers import templates
from corral.core.kube import kinds
from corral.core.kube.informer import Obj

TYPE = "nodeTemplate"


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    owned.check_type(body, TYPE)
    driver = driver_of(body, current=None)
    schema = owned.driver_schema(deps, driver, "driver", active=True)
    field = templates.config_field(driver)
    spec: dict[str, Any] = {
        "driver": driver,
        "config": templates.check_config(schema, or_empty(body.get(field), {}), field),
        **owned.described(body),
    }
    if "nodeTaints" in body:
        spec["nodeTaints"] = taints.parse(or_empty(body["nodeTaints"], []), "nodeTaints")
    credential = text(body, "cloudCredentialName", max_length=63)
    check_credential(deps, schema, driver, who.user_id, credential)
    if credential:
        spec["cloudCredentialName"] = credential
    created = await owned.create(deps, who, kinds.NodeTemplate, "nt", spec)
    deps.stores.nodetemplates.put(created)
    return created


async def update(deps: Deps, obj: Obj, body: dict[str, Any]) -> Obj:
    """Replaces what the body gives; `<driver>Config` as a whole (checked again, defaults
    filled), so a field left out of it goes back to its default."""
    driver = driver_of(body, obj["spec"]["driver"])
    field = templates.config_field(driver)
    spec: dict[str, Any] = owned.described(body)
    if "nodeTaints" in body:
        spec["nodeTaints"] = taints.parse(or_empty(body["nodeTaints"], []), "nodeTaints")
    changes_credential = "cloudCredentialName" in body
    if field in body or changes_credential:
        schema = owned.driver_schema(deps, driver, "driver", active=field in body)
        if field in body:
            spec["config"] = templates.check_config(schema, or_empty(body[field], {}), field)
        if changes_credential:
            name = text(body, "cloudCredentialName", max_length=63)
            check_credential(deps, schema, driver, ownership.owner_of(obj), name)
            spec["cloudCredentialName"] = name
    return await owned.change(deps, kinds.NodeTemplate, deps.stores.nodetemplates, obj, spec)


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    name = name_of(obj)
    if pools := deps.stores.nodepools.by_index("template", name):
        raise errors.Conflict(in_use(who, name, pools), code="Conflict")
    # A pool that moved to another template keeps machines made from this one: removing them
    # needs its driver config and credential.
    if machines := deps.stores.nodes.by_index("template", name):
        raise errors.Conflict(f"node template {name} is still used by {len(machines)} "
                              "machine(s) of node pools", code="Conflict")  # fmt: skip
    await owned.remove(deps, kinds.NodeTemplate, deps.stores.nodetemplates, obj)


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
    deps: Deps, schema: dict[str, Any], driver: str, owner: str, name: str
) -> None:
    """A template of `owner` may name only a credential of `owner` for `driver`, and must name
    one that sets the driver's required secret fields. One `owner` does not see is refused as
    one that does not exist."""
    if not name:
        if needed := templates.missing(schema, ()):
            message = f"driver {driver} needs a cloud credential setting {', '.join(needed)}"
            raise errors.invalid("cloudCredentialName", message, "MissingRequired")
        return
    credential = deps.stores.cloudcredentials.get(name)
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


def in_use(who: Caller, template: str, pools: list[Obj]) -> str:
    """Why the template cannot go: the pools using it the caller sees, and how many others
    (an administrator may have used it in a cluster its owner does not see)."""
    shown = sorted(str(ScopedId.of(p)) for p in pools
                   if who.access.cluster_role(p["metadata"]["namespace"]) is not None)  # fmt: skip
    hidden = len(pools) - len(shown)
    named = ", ".join(shown + ([f"{hidden} other(s)"] if hidden else []))
    return f"node template {template} is used by node pools {named}"
