"""What node templates and cloud credentials share through `/v3`: they belong to their
creator (`corral.core.auth.ownership`), who alone sees them besides administrators (another
user's are 404, whether they exist or not), and they are checked against the schema their
driver declared."""

from __future__ import annotations

from typing import Any

from lightkube.models.meta_v1 import OwnerReference

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, name_text, referenced
from corral.core import errors, settings
from corral.core.api import names
from corral.core.auth import ownership
from corral.core.drivers import status as driver_status
from corral.core.kube.informer import Informer, Obj
from corral.core.provisioning import s3

MAX_DISPLAY_NAME = 256


def visible(who: Caller, cache: Informer, obj_id: str, what: str) -> Obj:
    obj = cache.get(obj_id)
    if obj is None or not ownership.sees(obj, who.user_id, who.is_admin):
        raise errors.not_found(f"{what} {obj_id} not found")
    return obj


def listed(who: Caller, cache: Informer) -> list[Obj]:
    return cache.all() if who.is_admin else cache.by_index("owner", who.user_id)


def usable_template(deps: Deps, who: Caller, name: Any, field: str = "nodeTemplateName") -> str:
    """A node template the caller may use whose driver may make machines now; 422 naming
    `field` otherwise, the same for a template they cannot see as for one that does not exist.
    """
    if not isinstance(name, str) or not name:
        raise errors.missing(field)
    template = referenced(
        lambda: visible(who, deps.stores.nodetemplates, name, "nodeTemplate"),
        field, f"node template {name}",
    )  # fmt: skip
    driver = (template.get("spec") or {}).get("driver", "")
    found_driver = deps.stores.nodedrivers.get(driver)
    if found_driver is None or not driver_status.usable(found_driver):
        raise errors.invalid(field, f"node driver {driver} of template {name} is not active "
                             "and ready: no machine can be made with it",
                             "InvalidReference")  # fmt: skip
    return name


def check_s3_target(deps: Deps, who: Caller, config: dict[str, Any], config_field: str) -> None:
    """The cloud credential an admitted configuration's `etcd.s3` names is one the caller may
    use and of the S3 kind; 422 naming `<config>.etcd.s3.cloudCredentialName` otherwise (one
    they cannot see is as one that does not exist)."""
    target = s3.target(config, config_field)
    if target is None:
        return
    allowed = deps.stores.enabled(settings.LINK_LOCAL_SETTING)
    s3.check_endpoint(target, f"{config_field}.etcd.s3", allowed)
    credential = deps.stores.cloudcredentials.get(target.credential)
    if credential is not None and not ownership.sees(credential, who.user_id, who.is_admin):
        credential = None
    s3.check_credential(credential, target, f"{config_field}.etcd.s3")


def ownership_metadata(deps: Deps, who: Caller) -> dict[str, Any]:
    """The metadata of a new object of the caller's: their id as its creator, and their User
    as its owner, so that deleting the user removes it."""
    user_id = who.user_id
    meta: dict[str, Any] = {"annotations": {names.ANNOTATION_CREATOR: user_id}}
    user = deps.stores.users.get(user_id)
    if user is not None:
        meta["ownerReferences"] = [owner_reference(names.USER.kind, user)]
    return meta


def owner_reference(kind: str, obj: Obj) -> OwnerReference:
    """A reference to one of corral's own objects, whose deletion deletes the referrer."""
    meta = obj["metadata"]
    return OwnerReference(apiVersion=names.API_VERSION, kind=kind, name=meta["name"],
                          uid=meta["uid"])  # fmt: skip


def driver_schema(deps: Deps, driver: str, field: str, active: bool) -> dict[str, Any]:
    """The schema `driver` declared; 422 naming `field` when there is no such driver, or,
    with `active`, when it is not active and ready (no new template may name it). The S3
    credential of etcd backups (`s3credentialConfig`) is corral's own, with no driver."""
    if driver == s3.CREDENTIAL_DRIVER:
        return s3.CREDENTIAL_SCHEMA
    obj = deps.stores.nodedrivers.get(driver)
    if obj is None:
        raise errors.invalid(field, f"node driver {driver} not found", "InvalidReference")
    if active and not driver_status.usable(obj):
        raise errors.invalid(field, f"node driver {driver} is not active and ready",
                             "InvalidReference")  # fmt: skip
    schema = (obj.get("status") or {}).get("schema")
    if not isinstance(schema, dict):
        raise errors.invalid(field, f"node driver {driver} has not declared its fields yet",
                             "InvalidReference")  # fmt: skip
    return schema


def described(body: dict[str, Any]) -> dict[str, str]:
    """The display name (`displayName`, or `name` as Rancher's clients send it) and the
    description a template's or a credential's body gives."""
    spec = {}
    for field in ("name", "displayName"):
        if field in body:
            spec["displayName"] = name_text(body, field, max_length=MAX_DISPLAY_NAME)
    if "description" in body:
        spec["description"] = description_text(body)
    return spec
