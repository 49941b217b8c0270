"""`/v3/cloudcredentials`: the secret fields a driver needs (an API key), usable only by the
templates of the credential's owner.

A credential is a cluster-scoped `CloudCredential` named `cc-xxxxx` (its id), belonging to its
creator (`services.owned`); its driver is the one of its one `<driver>credentialConfig`, whose
fields are the driver's `secret` ones. Their values are kept only in the Secret
`<id>-secret` of svc-system, which the CloudCredential owns (Kubernetes deletes it with it);
the CloudCredential lists which fields are set, which is all a response shows: no response,
not even the one to the create, carries a value, and none is logged.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.apiserver.deps import DEPS, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import or_empty, read_json
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import name_of, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import owned
from corral.core import errors
from corral.core.api import ids, names
from corral.core.auth import ownership
from corral.core.drivers import templates
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.provisioning import s3

SCHEMA = Schema(
    id="cloudCredential",
    plural="cloudCredentials",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "description": Field("string", create=True, update=True),
        "driver": readonly("reference[nodeDriver]",
                           "The driver of its <driver>credentialConfig; it cannot change"),
        "credentialFields": readonly("array[string]",
                                     "The fields of <driver>credentialConfig that are set; "
                                     "their values are never returned"),
        "creatorId": readonly("reference[user]"),
        "state": readonly("enum", "active or removing"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
)  # fmt: skip

routes = web.RouteTableDef()


def fields(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {
        "id": name_of(obj),
        "name": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "driver": spec.get("driver", ""),
        "credentialFields": sorted(spec.get("fields") or []),
        "creatorId": ownership.owner_of(obj),
        "state": "removing" if obj["metadata"].get("deletionTimestamp") else "active",
        **object_stamp(obj),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    base, name = base_url(request), name_of(obj)
    links = {"nodeTemplates": f"{base}/v3/nodetemplates?cloudCredentialName={name}"}
    if obj["spec"]["driver"] != s3.CREDENTIAL_DRIVER:  # corral's own kind has no driver
        links["nodeDriver"] = f"{base}/v3/nodedrivers/{obj['spec']['driver']}"
    return envelope.resource(base, SCHEMA, fields(obj), links=links)


def found(request: web.Request) -> Obj:
    return owned.visible(
        caller(request),
        request.app[DEPS].stores.cloudcredentials,
        request.match_info["id"],
        "cloudCredential",
    )


@routes.get(v3("cloudcredentials"))
async def list_credentials(request: web.Request) -> web.Response:
    mine = owned.listed(caller(request), request.app[DEPS].stores.cloudcredentials)
    body = envelope.collection(
        base_url(request), SCHEMA, mine,
        name_of, fields, lambda o: render(request, o), request.query, request.path,
        can_create=True,
    )  # fmt: skip
    return web.json_response(body)


@routes.get(v3("cloudcredentials", "/{id}"))
async def get_credential(request: web.Request) -> web.Response:
    return web.json_response(render(request, found(request)))


@routes.post(v3("cloudcredentials"))
async def create_credential(request: web.Request) -> web.Response:
    """The CloudCredential first, then its Secret owned by it: should the Secret not be
    written, the CloudCredential is deleted again; a credential whose Secret is missing (the
    API server stopped in between) has no fields, and a PUT gives it some."""
    body = await read_json(request)
    if body.get("type", SCHEMA.id) != SCHEMA.id:
        raise errors.invalid("type", f"type must be {SCHEMA.id}")
    driver = templates.driver_in(body, templates.CREDENTIAL_SUFFIX)
    if driver is None:
        raise errors.invalid("credentialConfig", "a credential needs a "
                             "<driver>credentialConfig, e.g. kwokcredentialConfig",
                             "MissingRequired")  # fmt: skip
    field = templates.credential_field(driver)
    schema = owned.driver_schema(deps(request), driver, field, active=True)
    values = templates.check_credential(schema, or_empty(body[field], {}), field, {})
    if driver == s3.CREDENTIAL_DRIVER and (lacking := templates.missing(schema, values)):
        # No template checks it later: a cluster's S3 target needs both keys.
        raise errors.missing(f"{field}.{lacking[0]}")
    spec = {"driver": driver, "fields": sorted(values), **owned.described(body)}
    kube = request.app[DEPS].kube
    metadata = ObjectMeta(
        name=ids.generate("cc"), **owned.ownership_metadata(deps(request), caller(request))
    )
    created = as_dict(await kube.create(kinds.CloudCredential(metadata=metadata, spec=spec)))
    try:
        await kube.create(secret_of(created, values))
    except Exception:
        await delete_if_present(kube, kinds.CloudCredential, name_of(created))
        raise
    request.app[DEPS].stores.cloudcredentials.put(created)
    return web.json_response(render(request, created), status=201)


def secret_of(credential: Obj, values: dict[str, Any], version: str | None = None) -> Secret:
    name = name_of(credential)
    return Secret(
        metadata=ObjectMeta(
            name=names.cloud_credential_secret_name(name),
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_CLOUD_CREDENTIAL: name},
            ownerReferences=[owned.owner_reference(names.CLOUD_CREDENTIAL.kind, credential)],
            resourceVersion=version,
        ),
        type="Opaque",
        data=templates.encode(values),
    )


@routes.put(v3("cloudcredentials", "/{id}"))
async def update_credential(request: web.Request) -> web.Response:
    """Each field of `<driver>credentialConfig` given replaces its value (null removes it);
    the others are kept. The Secret is written on condition that it is still the version
    read (409 otherwise, and nothing changes)."""
    obj = found(request)
    body = await read_json(request)
    driver = obj["spec"]["driver"]
    given = templates.driver_in(body, templates.CREDENTIAL_SUFFIX)
    if given is not None and given != driver:
        raise errors.invalid(templates.credential_field(given), "the driver of a credential "
                             f"cannot change (it is {driver})", "InvalidAction")  # fmt: skip
    spec: dict[str, Any] = owned.described(body)
    field = templates.credential_field(driver)
    kube = request.app[DEPS].kube
    if field in body:
        schema = owned.driver_schema(deps(request), driver, field, active=False)
        stored = await stored_secret(request, obj)
        current = templates.decode(stored.data if stored else None)
        values = templates.check_credential(schema, or_empty(body[field], {}), field, current)
        if stored is None:
            await kube.create(secret_of(obj, values))
        else:
            version = stored.metadata.resourceVersion if stored.metadata else None
            await kube.replace(secret_of(obj, values, version))
        spec["fields"] = sorted(values)
    if not spec:
        return web.json_response(render(request, obj))
    patch = [{"op": "add", "path": f"/spec/{k}", "value": v} for k, v in spec.items()]
    patched = as_dict(await kube.patch(
        kinds.CloudCredential, name_of(obj), patch, patch_type=PatchType.JSON
    ))  # fmt: skip
    request.app[DEPS].stores.cloudcredentials.put(patched)
    return web.json_response(render(request, patched))


async def stored_secret(request: web.Request, obj: Obj) -> Secret | None:
    """The credential's Secret, read now: no API server keeps secret values in memory."""
    try:
        secret: Secret = await request.app[DEPS].kube.get(
            Secret, names.cloud_credential_secret_name(name_of(obj)),
            namespace=names.SYSTEM_NAMESPACE,
        )  # fmt: skip
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return secret


@routes.delete(v3("cloudcredentials", "/{id}"))
async def delete_credential(request: web.Request) -> web.Response:
    obj = found(request)
    name = name_of(obj)
    users = sorted(
        name_of(t) for t in request.app[DEPS].stores.nodetemplates.by_index("credential", name)
    )
    if users:
        raise ApiError(409, "Conflict", f"cloud credential {name} is used by node templates "
                                        f"{', '.join(users)}")  # fmt: skip
    kube = request.app[DEPS].kube
    await delete_if_present(kube, kinds.CloudCredential, name)
    # Kubernetes would delete it with its owner; at once, nothing is left to read.
    await delete_if_present(kube, Secret, names.cloud_credential_secret_name(name),
                            names.SYSTEM_NAMESPACE)  # fmt: skip
    request.app[DEPS].stores.cloudcredentials.forget(name)
    return web.Response(status=204)
