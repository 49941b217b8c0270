"""`/v3/clusterregistrationtokens` (docs/design/real-machines.md, "Registration"): how machines
join a provisioned cluster (`services.registrationtokens`).

A token is a `ClusterRegistrationToken` in its cluster's namespace; its id is
`<cluster>:<name>`. Its owners and administrators see, create, rotate and delete the
cluster's tokens; nobody else sees any.
"""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web

from corral.apiserver.http.body import read_input
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.objects import object_stamp
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family, State
from corral.apiserver.resources.scoped import cluster_link, scoped_id
from corral.apiserver.services import registrationtokens
from corral.core import errors
from corral.core.kube.informer import Obj
from corral.core.registration import tokens
from corral.core.tunnel import manifest

SCHEMA = Schema(
    id="clusterRegistrationToken",
    plural="clusterRegistrationTokens",
    fields={
        "clusterId": Field("reference[cluster]", create=True, required=True,
                           description="A provisioned (rke2 or k3s) or an imported cluster; "
                                       "clusterName is the same"),
        "clusterName": Field("reference[cluster]", create=True),
        "ttl": Field("int", create=True, default=0,
                     description=f"Seconds until it expires: 0 (never) or "
                                 f"{tokens.MIN_TTL_SECONDS} to {tokens.MAX_TTL_SECONDS}"),
        "token": readonly("string", "The value machines present; a secret"),
        "command": readonly("string", "An imported cluster's: applies its agent's manifest"),
        "insecureCommand": readonly("string", "The command for a corral the cluster does not "
                                              "trust yet"),
        "nodeCommand": readonly("string", "A provisioned cluster's: joins a machine as a "
                                          "worker, corral's key pinned"),
        "insecureNodeCommand": readonly("string", "The node command without the pin"),
        "manifestUrl": readonly("string", "An imported cluster's: its agent's manifest, the "
                                          "token in it"),
        "expiresAt": readonly("date", "Empty: never"),
        "machine": readonly("string", "The one machine this token registers, if any"),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "name": readonly("string"),
        "metadata": readonly("json"),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={"rotate": {}},
)  # fmt: skip
ACTIONS = tuple(SCHEMA.resource_actions)


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    spec, cluster = obj.get("spec") or {}, obj["metadata"]["namespace"]
    value = registrationtokens.value(ask.deps, obj)
    url = registrationtokens.manifest_url(ask.deps, obj, value)
    # A provisioned cluster's token joins machines; an imported one's starts its agent.
    node = "" if url else value
    return {
        "id": scoped_id(obj),
        "name": obj["metadata"]["name"],
        "clusterId": cluster,
        "clusterName": cluster,
        "token": value,
        "command": manifest.command(url) if url else "",
        "insecureCommand": manifest.insecure_command(url) if url else "",
        "nodeCommand": registrationtokens.node_command(ask.deps, node),
        "insecureNodeCommand": registrationtokens.node_command(ask.deps, node, pinned=False),
        "manifestUrl": url,
        "expiresAt": spec.get("expiresAt", ""),
        "machine": spec.get("machine", ""),
        **object_stamp(obj),
    }


def state(obj: Obj) -> State:
    now = datetime.datetime.now(datetime.UTC)
    current = tokens.state(obj.get("spec") or {}, now)
    return current, "no", "" if current == tokens.ACTIVE else "the token has expired"


def shown_metadata(ask: Ask, obj: Obj) -> dict[str, Any]:
    """The token's metadata, and not its spec: where the value is kept is nobody's business
    outside the management cluster."""
    meta = obj["metadata"]
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "creationTimestamp") if k in meta}
    }


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=lambda ask: registrationtokens.listed(ask.deps, ask.who, ask.query.get("clusterId")),
    find=lambda ask, token_id: registrationtokens.find(ask.deps, ask.who, token_id),
    ident=scoped_id,
    fields=fields,
    state=state,
    detail=shown_metadata,
    links=cluster_link,
    actions=lambda ask, obj: ACTIONS,
    create=lambda ask, body: registrationtokens.create(ask.deps, ask.who, body),
    delete=lambda ask, obj: registrationtokens.delete(ask.deps, obj),
    noun="cluster registration token",
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)


@routes.post(FAMILY.collection_route + "/{id}")
async def token_action(request: web.Request) -> web.Response:
    asked, obj = await handlers.found(FAMILY, request)
    if action(request, set(ACTIONS)) is None:
        raise errors.Unsupported("POST on a cluster registration token needs ?action=rotate")
    await read_input(request, "rotate")
    rotated = await registrationtokens.rotate(asked.deps, obj)
    return json_response(FAMILY.render(asked, rotated))
