"""`/v3/nodetemplates` (spec 2.6, 4.4): which machine a node pool makes, with which driver.
How a template is checked against its driver and its credential: `services.nodetemplates`.
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import nodetemplates, owned
from corral.core.drivers import templates
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


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {
        **owned.fields(obj),
        "displayName": spec.get("displayName", ""),
        "cloudCredentialName": spec.get("cloudCredentialName", ""),
        "nodeTaints": spec.get("nodeTaints") or [],
        templates.config_field(spec.get("driver", "")): spec.get("config") or {},
        "transitioning": "no",
    }


def links(ask: Ask, obj: Obj) -> dict[str, str]:
    found = {"nodeDriver": f"{ask.base}/v3/nodedrivers/{obj['spec']['driver']}"}
    if credential := obj["spec"].get("cloudCredentialName"):
        found["cloudCredential"] = f"{ask.base}/v3/cloudcredentials/{credential}"
    return found


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: owned.listed(ask.who, ask.deps.stores.nodetemplates),
    find=lambda ask, name: owned.find(ask.who, ask.deps.stores.nodetemplates, name),
    fields=fields,
    links=links,
    create=lambda ask, body: nodetemplates.create(ask.deps, ask.who, body),
    update=lambda ask, obj, body: nodetemplates.update(ask.deps, obj, body),
    delete=lambda ask, obj: nodetemplates.delete(ask.deps, ask.who, obj),
    body_as_sent=True,
    named_fields=templates.names_config,
)
routes = handlers.routes(FAMILY)
