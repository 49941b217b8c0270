"""The `/v1/provisioning.svc.io.clusters` view: a provisioned cluster and its machine pools, read
from and written to the management Cluster and its NodePools (docs/api.md, "Provisioning
clusters"; rules in `core.provisioning.v1` and `core.provisioning.machinepools`).

The view answers as `/v3/clusters` does: the same visibility (another user's cluster is 404),
the same owners' right to change it, and the same write path (`services.clusters`): the same
admission of the cluster's spec and version, the same creation and the same deletion.

A write checks everything before it writes anything, so a refused request changes nothing.
An update then writes the Cluster first, on condition that what the view's resourceVersion is
made of (`v1.resource_version`: the Cluster's generation and its pools' digest) is still what
the client read: that write is the compare-and-swap, so of two updates from one version one
wins and the other gets 409 before it has touched a pool, while the operator's status writes
change neither. The pools follow; the update is idempotent, so a client whose request failed
part-way reads the view again and puts it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.services import clusters, owned
from corral.apiserver.services import upgrade as upgrading
from corral.core import errors, jsonpatch
from corral.core.api import drivers, ids, names
from corral.core.clusters.state import state
from corral.core.errors import Invalid
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.provisioning import machinepools, upgrade, v1
from corral.core.provisioning.flavours import FLAVOURS, Flavour
from corral.core.provisioning.machinepools import MachinePool


def view(deps: Deps, cluster: Obj) -> dict[str, Any]:
    """The view of `cluster`, as a Kubernetes object."""
    pools = [machinepools.of_nodepool(p["spec"]) for p in _pools(deps, cluster)]
    return v1.render(cluster, pools, state(cluster))


def writable(who: Caller, cluster: Obj) -> bool:
    """Whether the view's writes would let the caller through (`clusters.may_change`, the
    check they make): its `update` and `remove` links say so."""
    try:
        clusters.may_change(who, cluster)
    except errors.Forbidden:
        return False
    return True


def listed(deps: Deps, who: Caller, namespace: str | None) -> list[Obj]:
    """The provisioned clusters the caller sees, in `namespace` when given."""
    return [
        c
        for c in deps.stores.clusters.all()
        if (c.get("spec") or {}).get("driver") in drivers.HOSTED
        and (namespace is None or v1.name_of(c)[0] == namespace)
        and who.access.sees_cluster(c["metadata"]["name"])
    ]


def revision(deps: Deps, shown: list[Obj]) -> str:
    """The newest resourceVersion among the clusters listed and their pools."""
    objs = [*shown, *(p for c in shown for p in _pools(deps, c))]
    versions = [o["metadata"].get("resourceVersion", "") for o in objs]
    return max(versions, key=lambda v: (len(v), v), default="")


def found(deps: Deps, who: Caller, namespace: str, name: str) -> Obj:
    """The view's cluster, for those who see it; 404 for anyone else, whether it exists or
    not."""
    matches = deps.stores.clusters.by_index("v1", v1.key(namespace, name))
    if len(matches) != 1 or not who.access.sees_cluster(matches[0]["metadata"]["name"]):
        raise errors.not_found(f"{v1.SCHEMA_ID} {namespace}/{name} not found")
    return matches[0]


async def create(deps: Deps, who: Caller, namespace: str | None, body: dict[str, Any]) -> Obj:
    """A new provisioned cluster and its pools (administrators only, as through /v3)."""
    clusters.may_create(who)
    given = v1.parse(body)
    v1.check_labels_kept(given, None)
    if namespace is not None and given.namespace not in (None, namespace):
        raise errors.invalid("metadata.namespace", "metadata.namespace must be the path's")
    namespace = namespace or given.namespace
    if namespace is None:
        raise errors.missing("metadata.namespace")
    if given.name is None:
        raise errors.missing("metadata.name")
    name = given.name
    pools = v1.machine_pools(given, name) or []
    if deps.stores.clusters.by_index("v1", v1.key(namespace, name)):
        raise errors.conflict(f"{v1.SCHEMA_ID} {namespace}/{name} already exists")
    flavour = FLAVOURS[v1.flavour_of(given)]
    config = dict(given.config or {})
    # The admission names the configuration's fields; the plugin was given at rkeConfig.
    renamed = {}
    if given.networking is not None:
        renamed[f"{flavour.config_field}.networking"] = "rkeConfig.networking"
        if config.get("networking", given.networking) != given.networking:
            raise errors.invalid(
                "spec.rkeConfig.networking",
                f"spec.rkeConfig.networking and spec.{flavour.config_field}.networking differ; "
                "give one of them",
            )
        config["networking"] = given.networking
    with _under("spec.", renamed):
        admitted = clusters.admit(deps, who, flavour, config, given.version)
    _check_templates(deps, who, [(i, p) for i, p in enumerate(pools)], given.pools_at)

    cluster_id = v1.cluster_id(namespace, name)
    spec = {
        "displayName": name,
        "driver": flavour.driver,
        "kubernetesVersion": admitted.version,
        flavour.config_field: admitted.config,
    }
    created = await clusters.make(
        deps, cluster_id, spec,
        labels={v1.LABEL_NAMESPACE: namespace, v1.LABEL_NAME: name},
        annotations={v1.ANNOTATION_POOLS_HASH: machinepools.pools_hash(pools)},
        taken=f"{v1.SCHEMA_ID} {namespace}/{name} already exists, or is still being deleted",
    )  # fmt: skip
    kube = deps.kube
    try:
        # The operator makes the namespace too; the pools cannot wait for it.
        await ensure_namespace(kube, cluster_id, {names.LABEL_CLUSTER: cluster_id})
        for pool in pools:
            await _create_pool(deps, cluster_id, name, pool)
    except BaseException:
        # Nothing of a refused create stays: the cluster's deletion takes its pools.
        await delete_if_present(kube, kinds.Cluster, cluster_id)
        raise
    return created


async def update(deps: Deps, who: Caller, cluster: Obj, body: dict[str, Any]) -> Obj:
    """The view as `body` gives it: machine pools added, changed and removed; the version
    through the cluster's admission; the configuration as it is. Owners only."""
    cluster_id = cluster["metadata"]["name"]
    clusters.may_change(who, cluster)
    namespace, name = v1.name_of(cluster)
    given = v1.parse(body)
    v1.check_labels_kept(given, cluster)
    for field, value, expected in (
        ("metadata.namespace", given.namespace, namespace),
        ("metadata.name", given.name, name),
    ):
        if value is not None and value != expected:
            raise errors.invalid(field, f"{field} cannot change: it is {expected}", "InvalidAction")
    plan: machinepools.Plan | None = None

    async def decide(current: Obj) -> list[jsonpatch.Operation]:
        nonlocal plan
        spec = current.get("spec") or {}
        flavour = FLAVOURS[spec["driver"]]
        _check_fixed(flavour, spec, given)
        changes: list[jsonpatch.Operation] = []
        if given.version is not None:
            with _under("spec."):
                # The same version, however written, is no change; another is a roll,
                # admitted exactly as for a PUT through /v3.
                changes += upgrading.operations(deps, current, flavour, given.version)
        if given.resource_version not in (None, v1.resource_version(current)):
            raise _stale(namespace, name)
        if current["metadata"].get("deletionTimestamp"):
            raise errors.Conflict(f"cluster {cluster_id} is being deleted", code="Conflict")
        if given.pools is not None:
            fresh = await _fresh_pools(deps, cluster_id)
            existing = [machinepools.of_nodepool(p["spec"]) for p in fresh]
            desired = v1.machine_pools(given, name, existing) or []
            plan = machinepools.plan(fresh, desired)
            _check_plan(deps, who, plan, desired, given.pools_at)
            digest = machinepools.pools_hash(desired)
            annotations = current["metadata"].get("annotations") or {}
            if annotations.get(v1.ANNOTATION_POOLS_HASH) != digest:
                path = ("metadata", "annotations", v1.ANNOTATION_POOLS_HASH)
                changes.append(jsonpatch.add(current, path, digest))
        return changes

    # The Cluster is written on condition of what the view's resourceVersion is made of (and,
    # for a roll, of what its admission read): of two updates from one version one wins and
    # the other, decided again, gets 409 before it has touched a pool. The operator's status
    # writes are none of these, so they neither make a conditional update stale nor make an
    # unconditional one fail.
    reads = v1.VERSION_READS + (upgrade.READS if given.version is not None else ())
    cluster = await clusters.write(deps, cluster_id, decide, dict.fromkeys(reads))
    if plan is not None:
        await _apply(deps, cluster_id, name, plan)
    return cluster


def _pools(deps: Deps, cluster: Obj) -> list[Obj]:
    """The cluster's NodePools that are machine pools of its view."""
    return [
        p
        for p in deps.stores.nodepools.by_index("cluster", cluster["metadata"]["name"])
        if (p.get("spec") or {}).get("machinePoolName")
    ]


async def _fresh_pools(deps: Deps, cluster_id: str) -> list[Obj]:
    """The machine pools' NodePools as stored now, not as this replica's watch last saw them:
    a pool another replica just made is not made twice."""
    listed = deps.kube.list(kinds.NodePool, namespace=cluster_id)
    pools = [as_dict(p) async for p in listed]
    return [p for p in pools if (p.get("spec") or {}).get("machinePoolName")]


def _check_fixed(flavour: Flavour, spec: dict[str, Any], given: v1.Given) -> None:
    """The configuration, and its network plugin, are fixed once the cluster exists (as
    through /v3); given back unchanged they are no change."""
    stored = spec.get(flavour.config_field) or {}
    if given.driver is not None and given.driver != flavour.driver:
        field = f"spec.{FLAVOURS[given.driver].config_field}"
        raise errors.invalid(field, f"this cluster is {flavour.driver}; it cannot change",
                             "InvalidAction")  # fmt: skip
    if given.config is not None and given.config != stored:
        field = f"spec.{flavour.config_field}"
        raise errors.invalid(field, f"{field} cannot be changed after the cluster is created",
                             "InvalidAction")  # fmt: skip
    if given.networking is not None and given.networking != stored.get("networking"):
        raise errors.invalid(
            "spec.rkeConfig.networking",
            "spec.rkeConfig.networking cannot be changed after the cluster is created",
            "InvalidAction",
        )


def _check_plan(
    deps: Deps, who: Caller, plan: machinepools.Plan, desired: list[MachinePool], at: str
) -> None:
    """Roles are fixed once a pool exists; a new pool, another template or a raised quantity
    needs a template the caller may use now (as through /v3/nodepools)."""
    index = {pool.name: i for i, pool in enumerate(desired)}
    checked = [(index[pool.name], pool) for pool in plan.create]
    for obj, pool in plan.update:
        current = machinepools.of_nodepool(obj["spec"])
        role = machinepools.role_change(current, pool)
        if role is not None:
            field = f"{at}[{index[pool.name]}].{role}"
            raise errors.invalid(
                field,
                f"the roles of machine pool {pool.name} cannot change; give a pool of the new "
                "roles another name",
                "InvalidAction",
            )
        if pool.template != current.template or pool.quantity > current.quantity:
            checked.append((index[pool.name], pool))
    _check_templates(deps, who, checked, at)


def _check_templates(
    deps: Deps, who: Caller, pools: list[tuple[int, MachinePool]], at: str
) -> None:
    for i, pool in pools:
        owned.usable_template(deps, who, pool.template, f"{at}[{i}].machineConfigRef.name")


async def _apply(deps: Deps, cluster_id: str, name: str, plan: machinepools.Plan) -> None:
    kube, store = deps.kube, deps.stores.nodepools
    for pool in plan.create:
        await _create_pool(deps, cluster_id, name, pool)
    for obj, pool in plan.update:
        desired = machinepools.nodepool_spec(pool, cluster_id, name)
        ops = machinepools.changes(obj["spec"], desired)
        if ops:
            patched = await kube.patch(
                kinds.NodePool, obj["metadata"]["name"], ops, namespace=cluster_id,
                patch_type=PatchType.JSON,
            )  # fmt: skip
            store.put(as_dict(patched))
    for obj in plan.delete:
        # The operator removes the pool's machines (drained first when the pool says so).
        await delete_if_present(kube, kinds.NodePool, obj["metadata"]["name"], cluster_id)
        store.forget(f"{cluster_id}/{obj['metadata']['name']}")


async def _create_pool(deps: Deps, cluster_id: str, name: str, pool: MachinePool) -> None:
    spec = machinepools.nodepool_spec(pool, cluster_id, name)
    meta = ObjectMeta(name=ids.generate("np"), namespace=cluster_id)
    created = await deps.kube.create(kinds.NodePool(metadata=meta, spec=spec))
    deps.stores.nodepools.put(as_dict(created))


def _stale(namespace: str, name: str) -> errors.Conflict:
    return errors.Conflict(
        f"{v1.SCHEMA_ID} {namespace}/{name} has changed since it was read (its "
        "metadata.resourceVersion); read it again and put your change on that",
        code="Conflict",
    )


@contextlib.contextmanager
def _under(prefix: str, renamed: Mapping[str, str] | None = None) -> Iterator[None]:
    """The cluster's admission names /v3 fields; the view's are under `spec`, some of them
    (`renamed`, by the start of their names) elsewhere."""
    try:
        yield
    except Invalid as exc:
        field = exc.field
        for old, new in (renamed or {}).items():
            if field is not None and (field == old or field.startswith(old + ".")):
                field = new + field[len(old) :]
        raise Invalid(exc.message, f"{prefix}{field}" if field else None, exc.code) from None
