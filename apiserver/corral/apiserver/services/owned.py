"""What node templates and cloud credentials share through `/v3`: they belong to their
creator (`corral.core.auth.ownership`), who alone sees them besides administrators (another
user's are 404, whether they exist or not), they are checked against the schema their driver
declared, and they are made, changed and removed alike."""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import GenericGlobalResource
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, name_text
from corral.apiserver.http.objects import name_of, object_stamp
from corral.core import errors, settings
from corral.core.api import ids, names
from corral.core.auth import ownership
from corral.core.drivers import status as driver_status
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Informer, Obj
from corral.core.provisioning import s3

MAX_DISPLAY_NAME = 256


def find(who: Caller, cache: Informer, obj_id: str) -> Obj | None:
    """The object, when it exists and the caller may see it."""
    obj = cache.get(obj_id)
    return obj if obj is not None and ownership.sees(obj, who.user_id, who.is_admin) else None


def listed(who: Caller, cache: Informer) -> list[Obj]:
    return cache.all() if who.is_admin else cache.by_index("owner", who.user_id)


def usable_template(deps: Deps, who: Caller, name: Any, field: str = "nodeTemplateName") -> str:
    """A node template the caller may use whose driver may make machines now; 422 naming
    `field` otherwise, the same for a template they cannot see as for one that does not exist.
    """
    if not isinstance(name, str) or not name:
        raise errors.missing(field)
    template = find(who, deps.stores.nodetemplates, name)
    if template is None:
        raise errors.invalid(field, f"node template {name} not found", "InvalidReference")
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


def fields(obj: Obj) -> dict[str, Any]:
    """What every owned object shows: its id, display name, description, driver, creator,
    state (nothing is asked of the operator but its removal) and stamp."""
    spec = obj.get("spec") or {}
    return {
        "id": name_of(obj),
        "name": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "driver": spec.get("driver", ""),
        "creatorId": ownership.owner_of(obj),
        "state": "removing" if obj["metadata"].get("deletionTimestamp") else "active",
        **object_stamp(obj),
    }


def check_type(body: dict[str, Any], type_id: str) -> None:
    if body.get("type", type_id) != type_id:
        raise errors.invalid("type", f"type must be {type_id}")


async def create(
    deps: Deps, who: Caller, kind: type[GenericGlobalResource], prefix: str, spec: dict[str, Any]
) -> Obj:
    """A new object of the caller's, named `<prefix>-<random>`; not yet in the cache."""
    metadata = ObjectMeta(name=ids.generate(prefix), **ownership_metadata(deps, who))
    return as_dict(await deps.kube.create(kind(metadata=metadata, spec=spec)))


async def change(
    deps: Deps, kind: type[GenericGlobalResource], cache: Informer, obj: Obj, spec: dict[str, Any]
) -> Obj:
    """The spec fields given, each replaced whole (`add` replaces a member that is there: a
    config is replaced, not merged)."""
    if not spec:
        return obj
    patch = [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in spec.items()]
    patched = as_dict(await deps.kube.patch(kind, name_of(obj), patch, patch_type=PatchType.JSON))
    cache.put(patched)
    return patched


async def remove(deps: Deps, kind: type[GenericGlobalResource], cache: Informer, obj: Obj) -> None:
    await delete_if_present(deps.kube, kind, name_of(obj))
    cache.forget(name_of(obj))
