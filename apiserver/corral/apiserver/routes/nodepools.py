"""`/v3/nodepools` (spec 2.5, 4.4): a cluster kept at a quantity of machines from one template
(`services.nodepools`).

A pool is a `NodePool` named `np-xxxxx` in the namespace named after its cluster; its id is
`<cluster>:<name>`. The cluster's members see its pools; its owners (and administrators)
create, change and delete them.
"""

from __future__ import annotations

from typing import Any

from corral.apiserver.http.objects import object_fields, object_stamp
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.resources.scoped import cluster_link, scoped_id, seen_by_members
from corral.apiserver.resources.subscriptions import Subscribable
from corral.apiserver.services import nodepools
from corral.core.kube.informer import Obj
from corral.core.nodepools import spec as pool_spec
from corral.core.nodepools.status import state

SCHEMA = Schema(
    id="nodePool",
    plural="nodePools",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "displayName": Field("string", create=True, update=True),
        "clusterId": Field("reference[cluster]", create=True, required=True,
                           description="Immutable; clusterName is the same"),
        "clusterName": Field("reference[cluster]", create=True),
        "hostnamePrefix": Field("string", create=True, required=True,
                                description="Immutable; hostnames are it and a number"),
        "quantity": Field("int", create=True, update=True, default=1,
                          description=f"0 to {pool_spec.MAX_QUANTITY}; a change scales"),
        **{role: Field("boolean", create=True, default=False, description="Immutable")
           for role in pool_spec.ROLES},
        "nodeTemplateName": Field("reference[nodeTemplate]", create=True, update=True,
                                  required=True),
        "nodeLabels": Field("map[string]", create=True, update=True),
        "nodeAnnotations": Field("map[string]", create=True, update=True),
        "nodeTaints": Field("array[taint]", create=True, update=True),
        "drainBeforeDelete": Field("boolean", create=True, update=True, default=False),
        "deleteNotReadyAfterSecs": Field(
            "int", create=True, update=True, default=0,
            description=f"0 (never) to {pool_spec.MAX_NOT_READY_SECS}"),
        "requested": readonly("int", "Machines the pool has"),
        "provisioning": readonly("int", "Machines not yet Ready"),
        "ready": readonly("int", "Machines whose node is Ready"),
        "failing": readonly("int", "Machines whose driver reports a failure"),
        "lastError": readonly("string"),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
)  # fmt: skip


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "id": scoped_id(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        **nodepools.fixed(obj),
        "quantity": spec.get("quantity", 1),
        "nodeTemplateName": spec.get("nodeTemplateName", ""),
        "nodeLabels": spec.get("nodeLabels") or {},
        "nodeAnnotations": spec.get("nodeAnnotations") or {},
        "nodeTaints": spec.get("nodeTaints") or [],
        "drainBeforeDelete": bool(spec.get("drainBeforeDelete")),
        "deleteNotReadyAfterSecs": spec.get("deleteNotReadyAfterSecs", 0),
        **{count: status.get(count, 0) for count in ("requested", "provisioning", "ready",
                                                     "failing")},
        "lastError": status.get("lastError", ""),
        **object_stamp(obj),
    }  # fmt: skip


def links(ask: Ask, obj: Obj) -> dict[str, str]:
    cluster = obj["metadata"]["namespace"]
    return {
        **cluster_link(ask, obj),
        "nodeTemplate": f"{ask.base}/v3/nodetemplates/{obj['spec'].get('nodeTemplateName', '')}",
        "nodes": f"{ask.base}/v3/clusters/{cluster}/nodes?nodePoolId={scoped_id(obj)}",
    }


FAMILY = Family[Obj](
    schema=SCHEMA,
    **seen_by_members(lambda stores: stores.nodepools),
    fields=fields,
    state=state,
    detail=lambda ask, obj: object_fields(obj, ("name", "namespace", "creationTimestamp")),
    links=links,
    before_update=lambda ask, obj: nodepools.may_change(ask.who, obj),
    before_delete=lambda ask, obj: nodepools.may_delete(ask.who, obj),
    create=lambda ask, body: nodepools.create(ask.deps, ask.who, body),
    update=lambda ask, obj, body: nodepools.update(ask.deps, ask.who, obj, body),
    delete=lambda ask, obj: nodepools.delete(ask.deps, ask.who, obj),
    noun="node pool",
    body_as_sent=True,
)
routes = handlers.routes(FAMILY)

# `GET /v3/subscribe`: a pool's changes go to its cluster's members and owners, as `find`.
SUBSCRIBABLE = Subscribable(
    FAMILY,
    cache="nodepools",
    sees=lambda ask, obj: ask.who.access.cluster_role(obj["metadata"]["namespace"]) is not None,
)
