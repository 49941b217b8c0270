"""Cloud credentials: the secret fields a driver needs (an API key), usable only by the
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

from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import or_empty
from corral.apiserver.http.objects import name_of
from corral.apiserver.services import owned
from corral.core import errors
from corral.core.api import names
from corral.core.drivers import templates
from corral.core.kube import kinds
from corral.core.kube.client import delete_if_present
from corral.core.kube.informer import Obj
from corral.core.provisioning import s3

TYPE = "cloudCredential"


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    """The CloudCredential first, then its Secret owned by it: should the Secret not be
    written, the CloudCredential is deleted again; a credential whose Secret is missing (the
    API server stopped in between) has no fields, and a PUT gives it some."""
    owned.check_type(body, TYPE)
    driver = templates.driver_in(body, templates.CREDENTIAL_SUFFIX)
    if driver is None:
        raise errors.invalid("credentialConfig", "a credential needs a "
                             "<driver>credentialConfig, e.g. kwokcredentialConfig",
                             "MissingRequired")  # fmt: skip
    field = templates.credential_field(driver)
    schema = owned.driver_schema(deps, driver, field, active=True)
    values = templates.check_credential(schema, or_empty(body[field], {}), field, {})
    if driver == s3.CREDENTIAL_DRIVER and (lacking := templates.missing(schema, values)):
        # No template checks it later: a cluster's S3 target needs both keys.
        raise errors.missing(f"{field}.{lacking[0]}")
    spec = {"driver": driver, "fields": sorted(values), **owned.described(body)}
    created = await owned.create(deps, who, kinds.CloudCredential, "cc", spec)
    try:
        await deps.kube.create(_secret_of(created, values))
    except Exception:
        await delete_if_present(deps.kube, kinds.CloudCredential, name_of(created))
        raise
    deps.stores.cloudcredentials.put(created)
    return created


async def update(deps: Deps, obj: Obj, body: dict[str, Any]) -> Obj:
    """Each field of `<driver>credentialConfig` given replaces its value (null removes it);
    the others are kept. The Secret is written on condition that it is still the version
    read (409 otherwise, and nothing changes)."""
    driver = obj["spec"]["driver"]
    given = templates.driver_in(body, templates.CREDENTIAL_SUFFIX)
    if given is not None and given != driver:
        raise errors.invalid(templates.credential_field(given), "the driver of a credential "
                             f"cannot change (it is {driver})", "InvalidAction")  # fmt: skip
    spec: dict[str, Any] = owned.described(body)
    field = templates.credential_field(driver)
    if field in body:
        schema = owned.driver_schema(deps, driver, field, active=False)
        stored = await _stored_secret(deps, obj)
        current = templates.decode(stored.data if stored else None)
        values = templates.check_credential(schema, or_empty(body[field], {}), field, current)
        if stored is None:
            await deps.kube.create(_secret_of(obj, values))
        else:
            version = stored.metadata.resourceVersion if stored.metadata else None
            await deps.kube.replace(_secret_of(obj, values, version))
        spec["fields"] = sorted(values)
    return await owned.change(deps, kinds.CloudCredential, deps.stores.cloudcredentials, obj, spec)


async def delete(deps: Deps, obj: Obj) -> None:
    name = name_of(obj)
    users = sorted(name_of(t) for t in deps.stores.nodetemplates.by_index("credential", name))
    if users:
        raise errors.Conflict(f"cloud credential {name} is used by node templates "
                              f"{', '.join(users)}", code="Conflict")  # fmt: skip
    await owned.remove(deps, kinds.CloudCredential, deps.stores.cloudcredentials, obj)
    # Kubernetes would delete it with its owner; at once, nothing is left to read.
    await delete_if_present(deps.kube, Secret, names.cloud_credential_secret_name(name),
                            names.SYSTEM_NAMESPACE)  # fmt: skip


def _secret_of(credential: Obj, values: dict[str, Any], version: str | None = None) -> Secret:
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


async def _stored_secret(deps: Deps, obj: Obj) -> Secret | None:
    """The credential's Secret, read now: no API server keeps secret values in memory."""
    try:
        secret: Secret = await deps.kube.get(
            Secret, names.cloud_credential_secret_name(name_of(obj)),
            namespace=names.SYSTEM_NAMESPACE,
        )  # fmt: skip
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return secret
