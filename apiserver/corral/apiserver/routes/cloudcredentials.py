"""`/v3/cloudcredentials`: the secret fields a driver needs (an API key), usable only by the
templates of the credential's owner. What is stored where, and that no value is ever shown:
`services.cloudcredentials`.
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.objects import name_of
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import cloudcredentials, owned
from corral.core.drivers import templates
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


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {**owned.fields(obj), "credentialFields": sorted(spec.get("fields") or [])}


def links(ask: Ask, obj: Obj) -> dict[str, str]:
    found = {"nodeTemplates": f"{ask.base}/v3/nodetemplates?cloudCredentialName={name_of(obj)}"}
    if obj["spec"]["driver"] != s3.CREDENTIAL_DRIVER:  # corral's own kind has no driver
        found["nodeDriver"] = f"{ask.base}/v3/nodedrivers/{obj['spec']['driver']}"
    return found


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: owned.listed(ask.who, ask.deps.stores.cloudcredentials),
    find=lambda ask, name: owned.find(ask.who, ask.deps.stores.cloudcredentials, name),
    fields=fields,
    links=links,
    create=lambda ask, body: cloudcredentials.create(ask.deps, ask.who, body),
    update=lambda ask, obj, body: cloudcredentials.update(ask.deps, obj, body),
    delete=lambda ask, obj: cloudcredentials.delete(ask.deps, obj),
    body_as_sent=True,
    named_fields=templates.names_credential,
)
routes = handlers.routes(FAMILY)
