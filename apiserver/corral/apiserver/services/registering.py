"""A machine registering itself with a cluster registration token (`POST
/v3/connect/register`; docs/design/real-machines.md, "POST /v3/connect/register").

The token is the only credential: a machine has no corral user. A token that is unknown,
revoked, rotated away or expired registers nothing (`presented` finds none, and the route
answers 401). With a good one corral checks that the cluster is provisioned, Ready and that its
version has real machines, finds or makes the machine's record, issues its join credential in
the cluster (`core.kube.joining`) and answers the tar of `core.registration.bundle`. A
machine's own token (`spec.machine`, a node pool's machine) registers that record alone, once.
"""

from __future__ import annotations

import dataclasses
import datetime

from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import Deps
from corral.core import conditions, errors
from corral.core.api import condition_types as ct
from corral.core.api import drivers, names
from corral.core.api.ids import ScopedId
from corral.core.clusters import taints as node_taints
from corral.core.kube import joining, kinds, registration_tokens
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.provisioning import catalog
from corral.core.registration import bundle, tokens
from corral.core.registration.request import Registration


def presented(deps: Deps, value: str) -> Obj | None:
    """The live token whose value this is; None for any other value."""
    if not tokens.well_formed(value):
        return None
    now = datetime.datetime.now(datetime.UTC)
    for token in deps.stores.registration_tokens.by_index("hash", tokens.digest(value)):
        if not token["metadata"].get("deletionTimestamp") and not tokens.expired(
            token["spec"], now
        ):
            return token
    return None


async def register(deps: Deps, token: Obj, machine: Registration) -> bytes:
    cluster_id = token["metadata"]["namespace"]
    cluster = _ready_cluster(deps, cluster_id)
    assets = _assets(deps, cluster)
    # Everything that can refuse does so before anything is written.
    credential = deps.connections.credential(cluster_id)
    if credential is None or not credential.ca_cert:
        raise errors.Unavailable(f"cluster {cluster_id} cannot be reached yet")
    record = await _record(deps, token, cluster_id, machine)
    if token["spec"].get("machine"):
        machine = _as_recorded(record, machine)
    client = await deps.connections.client(cluster_id)
    name = record["metadata"]["name"]
    join_token = await joining.issue(client, name, machine.hostname)
    if token["spec"].get("machine"):
        await registration_tokens.delete(deps.kube, token)
        deps.stores.registration_tokens.forget(f"{cluster_id}/{token['metadata']['name']}")
    server = (cluster.get("status") or {}).get("provisioning", {}).get("endpoint")
    files = bundle.files(
        bundle.Machine(
            hostname=machine.hostname, record=name, address=machine.address,
            internal_address=machine.internal_address, labels=machine.labels,
            taints=machine.taints, cgroup_driver=machine.cgroup_driver,
            cgroup_root=machine.cgroup_root, containerd_socket=machine.containerd_socket,
        ),
        bundle.Cluster(server or credential.server, credential.ca_cert),
        join_token,
        assets,
    )  # fmt: skip
    return bundle.tar(files)


def _as_recorded(record: Obj, machine: Registration) -> Registration:
    """A machine corral made (a pool's, or one added over SSH) registers as its record says,
    whatever its installer was told (the node command its driver runs names nothing): labelled
    with its pool's name, which pods select the pool by and the autoscaler's template node
    carries, and with the record's taints, which keep pods off from the node's first moment
    rather than from the node mirror's next pass. The pool's `nodeLabels` follow from the pool
    reconciler: the kubelet would refuse to start with a `kubernetes.io` label among them."""
    spec = record["spec"]
    labels = dict(machine.labels)
    if pool := spec.get("nodePoolName"):
        labels[names.LABEL_NODE_POOL] = ScopedId.parse(pool).name
    taints = node_taints.parse(spec.get("desiredNodeTaints") or [])
    return dataclasses.replace(machine, labels=labels, taints=tuple(taints))


def _ready_cluster(deps: Deps, cluster_id: str) -> Obj:
    cluster = deps.stores.clusters.get(cluster_id)
    if cluster is None or cluster["metadata"].get("deletionTimestamp"):
        raise errors.Invalid(f"cluster {cluster_id} is being deleted", code="InvalidState")
    status = cluster.get("status") or {}
    ready = (
        cluster["spec"].get("driver") in drivers.HOSTED
        and (status.get("provisioning") or {}).get("ready") is True
        and conditions.is_true(status.get("conditions") or [], ct.READY)
    )
    if not ready:
        raise errors.Invalid(
            f"cluster {cluster_id} is not provisioned and Ready yet; try again when it is",
            code="InvalidState",
        )
    return cluster


def _assets(deps: Deps, cluster: Obj) -> list[bundle.Asset]:
    """The downloads of the version the control plane runs; 422 for a version without."""
    version = ((cluster.get("status") or {}).get("provisioning") or {}).get("appliedVersion")
    version = version or cluster["spec"].get("kubernetesVersion", "")
    release = deps.stores.catalog().release(version)
    if release.node is None:
        raise errors.Invalid(
            f"Kubernetes {version} has no node downloads in the catalog (setting "
            f"{catalog.SETTING}): its clusters take no real machines",
            code="InvalidOption",
        )
    base = deps.external_url
    return [
        bundle.Asset(name, base + asset.url if asset.url.startswith("/") else asset.url,
                     asset.sha256)
        for name, asset in sorted(release.node.items())
    ]  # fmt: skip


async def _record(deps: Deps, token: Obj, cluster_id: str, machine: Registration) -> Obj:
    """The machine's Node CR: its own (a pool's machine, named by its token), the custom
    machine's that registered this hostname before (it is being installed again), or a new
    one; 409 for a hostname another machine has."""
    name = names.node_cr_name(machine.hostname)
    found = deps.stores.nodes.get(f"{cluster_id}/{name}")
    own = token["spec"].get("machine", "")
    if own:
        if name != own:
            raise errors.Conflict(
                f"this token registers machine {own} only, not {machine.hostname}",
                code="Conflict",
            )
        if found is None:
            raise errors.Invalid(f"machine {own} is gone", code="InvalidState")
        return found
    if found is not None:
        source = (found["metadata"].get("labels") or {}).get(names.LABEL_NODE_SOURCE)
        if source != names.NODE_SOURCE_CUSTOM:
            raise errors.Conflict(
                f"hostname {machine.hostname} is already a node of cluster {cluster_id}",
                code="AlreadyExists",
            )
        return found
    custom = {k: v for k, v in (("address", machine.address),
                                ("internalAddress", machine.internal_address)) if v}  # fmt: skip
    spec = {"requestedHostname": machine.hostname, "worker": True, "customConfig": custom,
            "desiredNodeTaints": [dict(t) for t in machine.taints]}  # fmt: skip
    meta = ObjectMeta(name=name, namespace=cluster_id,
                      labels={names.LABEL_NODE_SOURCE: names.NODE_SOURCE_CUSTOM})  # fmt: skip
    try:
        created = as_dict(await deps.kube.create(kinds.Node(metadata=meta, spec=spec)))
    except ApiError as exc:
        if exc.status.code == 409:
            raise errors.Conflict(
                f"hostname {machine.hostname} is being registered by another machine",
                code="AlreadyExists",
            ) from None
        raise
    deps.stores.nodes.put(created)
    return created
