"""A cluster's nodes (spec 4.3), as the Node CRs the operator mirrors. Changes go where they
belong: taints and schedulability into the CR's desired fields (the operator applies them and
reports `Updated` and `Drained`), deletion straight to the downstream node (the operator then
drops the CR). The caller owns the node's cluster: the route checked it before finding the
node, as a nested resource's parent is checked first.

A node is created only for an existing machine the operator installs over SSH
(`customConfig`, `corral.core.drivers.custom`): its record names a Secret in svc-system that
holds the key. The record is written first and the Secret second, so no key is ever kept for
a record that does not exist; the operator waits for the Secret, and removes it with the
record.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, either, flag, name_text
from corral.apiserver.services.visibility import (
    require_cluster_owner,
    seen_cluster,
    settle_cluster,
)
from corral.core import errors
from corral.core.api import drivers, ids, names
from corral.core.clusters import taints
from corral.core.drivers import custom
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj

ROLES = ("etcd", "controlPlane", "worker")


def may_change(who: Caller, cluster_id: str, what: str) -> None:
    """Nodes are added, changed, cordoned, drained and removed by their cluster's owners."""
    require_cluster_owner(who, cluster_id, what)


async def create(deps: Deps, who: Caller, cluster_id: str, body: dict[str, Any]) -> Obj:
    """An existing machine the operator installs over SSH as a worker of `cluster_id` (a
    provisioned cluster the caller owns)."""
    await settle_cluster(deps, who, cluster_id)
    cluster = seen_cluster(deps, who, cluster_id)
    if cluster is None:
        raise errors.invalid("clusterId", f"cluster {cluster_id} not found", "InvalidReference")
    may_change(who, cluster_id, "add its nodes")
    if cluster["spec"].get("driver") not in drivers.HOSTED:
        raise errors.invalid(
            "clusterId",
            f"cluster {cluster_id} is not provisioned by corral: machines are added over SSH "
            f"only to {drivers.RKE2} and {drivers.K3S} clusters",
            "InvalidOption",
        )
    if cluster["metadata"].get("deletionTimestamp"):
        raise errors.Conflict(f"cluster {cluster_id} is being deleted", code="Conflict")
    for role in ("etcd", "controlPlane"):
        if flag(body, role, False):
            raise errors.invalid(
                role,
                f"{role} is refused: the control plane of a corral cluster is hosted, its "
                "machines are workers",
                "InvalidOption",
            )
    if not flag(body, "worker", True):
        raise errors.invalid("worker", "a machine added over SSH is a worker", "InvalidOption")
    if body.get(custom.FIELD) is None:
        raise errors.missing(custom.FIELD)
    config, key = custom.parse(body[custom.FIELD])
    hostname = custom.hostname(body)
    spec: dict[str, Any] = {"requestedHostname": hostname, "worker": True}
    if "displayName" in body:
        spec["displayName"] = name_text(body, "displayName")
    if "description" in body:
        spec["description"] = description_text(body)
    if body.get("desiredNodeTaints") is not None:
        spec["desiredNodeTaints"] = taints.parse(body["desiredNodeTaints"])
    # Last, as the dearest: a big RSA key takes a moment to load.
    await asyncio.to_thread(custom.check_private_key, key)
    return await _write(deps, cluster_id, spec, config, key)


async def _write(
    deps: Deps, cluster_id: str, spec: dict[str, Any], config: custom.CustomConfig, key: str
) -> Obj:
    hostname = spec["requestedHostname"]
    name = names.node_cr_name(hostname)
    secret_name = names.ssh_key_secret_name(cluster_id, name)
    # The operator's finalizer from the start: a machine deleted before the operator first saw
    # it is still uninstalled.
    meta = ObjectMeta(
        name=name,
        namespace=cluster_id,
        labels={names.LABEL_NODE_SOURCE: names.NODE_SOURCE_SSH},
        finalizers=[names.FINALIZER_OPERATOR],
    )
    record = kinds.Node(metadata=meta, spec={**spec, custom.FIELD: config.stored(secret_name)})
    try:
        created = as_dict(await deps.kube.create(record))
    except ApiError as exc:
        if exc.status.code == 409:
            raise errors.Conflict(
                f"hostname {hostname} is already a node of cluster {cluster_id}",
                code="AlreadyExists",
            ) from None
        if exc.status.code == 404:
            # The operator makes the cluster's namespace a moment after the cluster.
            raise errors.Unavailable(
                f"cluster {cluster_id} is still being set up: add its machines in a moment"
            ) from None
        raise
    secret = Secret(
        metadata=ObjectMeta(
            name=secret_name,
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_CLUSTER: cluster_id, names.LABEL_SSH_KEY: name},
        ),
        type="Opaque",
        data={names.SSH_KEY_FIELD: base64.b64encode(key.encode()).decode()},
    )
    try:
        await deps.kube.create(secret)
    except BaseException:
        # A record whose key was never written would wait for it for ever.
        await delete_if_present(deps.kube, kinds.Node, name, cluster_id)
        raise
    deps.stores.nodes.put(created)
    return created


def custom_id(body: dict[str, Any]) -> str:
    """The cluster a `POST /v3/nodes` body names."""
    return either(body, ("clusterId", "clusterName"), ids.MAX_LABEL)


async def update(deps: Deps, obj: Obj, body: dict[str, Any]) -> Obj:
    spec = obj.get("spec") or {}
    # Compared with what a GET shows of them, so that a node read can be put back.
    shown = {"requestedHostname": spec.get("requestedHostname", "")}
    shown |= {role: spec.get(role, False) for role in ROLES}
    for field, value in shown.items():
        if field in body and body[field] != value:
            raise errors.invalid(field, f"{field} cannot be changed", code="InvalidAction")
    patch: dict[str, Any] = {}
    if "displayName" in body:
        patch["displayName"] = name_text(body, "displayName")
    if "description" in body:
        patch["description"] = description_text(body)
    if "desiredNodeTaints" in body:
        # Validated as the cluster would, so a taint it refuses never reaches the Node CR.
        given = body["desiredNodeTaints"]
        patch["desiredNodeTaints"] = None if given is None else taints.parse(given)
    return await desire(deps, obj, patch)


async def desire(deps: Deps, obj: Obj, patch: dict[str, Any]) -> Obj:
    """The node with `patch` merged into its spec: what the operator is to make of it."""
    if not patch:
        return obj
    meta = obj["metadata"]
    updated = as_dict(
        await deps.kube.patch(
            kinds.Node,
            meta["name"],
            {"spec": patch},
            namespace=meta["namespace"],
            patch_type=PatchType.MERGE,
        )
    )
    deps.stores.nodes.put(updated)
    return updated


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    """Removes the node from the cluster; the operator then removes its Node CR. A node
    pool's machine is removed by deleting its record: the operator removes the machine
    through its driver (drained first when its pool says so), and the pool makes another.
    A machine added over SSH too: the operator uninstalls it and removes its node."""
    cluster = obj["metadata"]["namespace"]
    source = (obj["metadata"].get("labels") or {}).get(names.LABEL_NODE_SOURCE)
    if obj["spec"].get("nodePoolName") or source == names.NODE_SOURCE_SSH:
        await delete_if_present(deps.kube, kinds.Node, obj["metadata"]["name"], cluster)
        return
    if deps.connections.credential(cluster) is None:
        # Not a conflict (409 is for what already exists): the cluster cannot be reached
        # until it is imported, so the node cannot be deleted there yet.
        raise errors.Unavailable(
            f"cluster {cluster} cannot be reached: corral has no credential for it (it waits "
            "for an import), so the node cannot be deleted in it"
        )
    node_name = (obj.get("status") or {}).get("nodeName") or obj["spec"]["requestedHostname"]
    client = await deps.connections.client_as(cluster, who.downstream())
    await delete_if_present(client, DownstreamNode, node_name)
