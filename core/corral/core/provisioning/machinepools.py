"""Machine pools of a provisioned cluster's `/v1` view (docs/api.md, "Provisioning clusters"),
checked before anything is written, and their NodePools.

A machine pool is one NodePool in the cluster's namespace, named `np-xxxxx`, whose
`machinePoolName` (immutable) is the pool's name. Its roles are the NodePool's role flags and
the node-role labels its nodes carry; the etcd and control-plane roles are recorded only,
because the control plane of a provisioned cluster is hosted. The rules are Rancher's
(provisioning.md 4.1), which the NodePool CRD repeats in CEL: at least one role; both
autoscaling bounds or neither; min ≤ max; min ≥ 1 for etcd and control-plane pools; quantity
within the bounds; pool names unique.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.errors import Invalid
from corral.core.nodepools import spec as pool_spec

# Bounds a request: every pool is one object written.
MAX_POOLS = 100
TEMPLATE_KIND = "NodeTemplate"
# v1 role field → (NodePool flag, node-role labels its nodes carry).
ROLES = {
    "etcdRole": ("etcd", ("node-role.kubernetes.io/etcd",)),
    "controlPlaneRole": ("controlPlane", ("node-role.kubernetes.io/control-plane",)),
    "workerRole": ("worker", ("node-role.kubernetes.io/worker",)),
}
FIELDS = frozenset(
    {"name", "quantity", "autoscalingMinSize", "autoscalingMaxSize", "drainBeforeDelete",
     "machineConfigRef", *ROLES}
)  # fmt: skip
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)


@dataclass(frozen=True)
class MachinePool:
    name: str
    quantity: int
    etcd: bool
    control_plane: bool
    worker: bool
    drain_before_delete: bool
    template: str  # the NodeTemplate its machines are made from
    min_size: int | None = None
    max_size: int | None = None

    def shown(self) -> dict[str, Any]:
        """The pool as `/v1` shows it."""
        shown: dict[str, Any] = {
            "name": self.name,
            "quantity": self.quantity,
            "etcdRole": self.etcd,
            "controlPlaneRole": self.control_plane,
            "workerRole": self.worker,
            "drainBeforeDelete": self.drain_before_delete,
            "machineConfigRef": {"kind": TEMPLATE_KIND, "name": self.template},
        }
        if self.min_size is not None:
            shown |= {"autoscalingMinSize": self.min_size, "autoscalingMaxSize": self.max_size}
        return shown


def parse(
    value: Any, cluster_name: str, where: str, existing: Iterable[MachinePool] = ()
) -> list[MachinePool]:
    """The pools a request gives at `where` (`spec.rkeConfig.machinePools`, or spec 4.4's
    `machinePools`) for the cluster whose `/v1` name is `cluster_name` and whose pools are
    `existing`; Invalid naming the field of the first fault.

    A pool that exists keeps its template and its roles when the request leaves them out:
    spec 4.4's body names neither, and roles cannot change anyway."""
    current = {pool.name: pool for pool in existing}
    if not isinstance(value, list):
        raise Invalid(f"{where} must be a list of machine pools", where)
    if len(value) > MAX_POOLS:
        raise Invalid(f"{where} may hold at most {MAX_POOLS} machine pools", where)
    pools: list[MachinePool] = []
    seen: set[str] = set()
    for index, given in enumerate(value):
        at = f"{where}[{index}]"
        name = given.get("name") if isinstance(given, dict) else None
        pool = _pool(given, cluster_name, at, current.get(name) if isinstance(name, str) else None)
        if pool.name in seen:
            raise Invalid(
                f"machine pool names must be unique: {pool.name} is given twice",
                f"{where}[{index}].name",
                code="NotUnique",
            )
        seen.add(pool.name)
        pools.append(pool)
    return pools


def _pool(given: Any, cluster_name: str, at: str, now: MachinePool | None) -> MachinePool:
    if not isinstance(given, dict):
        raise Invalid(f"{at} must be an object", at)
    for key in given:
        if key not in FIELDS:
            raise Invalid(
                f"{at}.{key} is not a machine pool field; the fields are "
                f"{', '.join(sorted(FIELDS))}",
                f"{at}.{key}",
            )
    name = _name(given.get("name"), cluster_name, f"{at}.name")
    roles = {field: _flag(given, field, at) for field in ROLES}
    if now is not None:
        kept = {"etcdRole": now.etcd, "controlPlaneRole": now.control_plane,
                "workerRole": now.worker}  # fmt: skip
        roles = {field: roles[field] if field in given else kept[field] for field in ROLES}
    if not any(roles.values()):
        raise Invalid(
            f"{at} needs at least one role: etcdRole, controlPlaneRole or workerRole",
            f"{at}.workerRole",
        )
    min_size, max_size = _bounds(given, roles, at)
    if "quantity" in given:
        quantity = _count(given["quantity"], f"{at}.quantity")
    else:
        quantity = 1 if min_size is None else min_size
    if min_size is not None and max_size is not None and not min_size <= quantity <= max_size:
        raise Invalid(
            f"{at}.quantity ({quantity}) must be within autoscalingMinSize ({min_size}) and "
            f"autoscalingMaxSize ({max_size})",
            f"{at}.quantity",
        )
    return MachinePool(
        name=name,
        quantity=quantity,
        etcd=roles["etcdRole"],
        control_plane=roles["controlPlaneRole"],
        worker=roles["workerRole"],
        drain_before_delete=_flag(given, "drainBeforeDelete", at),
        template=(
            now.template
            if now is not None and given.get("machineConfigRef") is None
            else _template(given.get("machineConfigRef"), f"{at}.machineConfigRef")
        ),
        min_size=min_size,
        max_size=max_size,
    )


def _name(value: Any, cluster_name: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid(f"{field} is required", field, code="MissingRequired")
    if len(value) > pool_spec.MAX_PREFIX or not _NAME.fullmatch(value):
        raise Invalid(
            f"{field} must be lower-case letters, digits or '-', starting and ending with a "
            "letter or digit",
            field,
        )
    if len(prefix(cluster_name, value)) > pool_spec.MAX_PREFIX:
        raise Invalid(
            f"machine pool {value} of cluster {cluster_name}: their hostnames "
            f"({prefix(cluster_name, value)}<number>) would be longer than a DNS label; "
            f"cluster name and pool name may have {pool_spec.MAX_PREFIX - 2} characters together",
            field,
        )
    return value


def _flag(given: Mapping[str, Any], field: str, at: str) -> bool:
    value = given.get(field, False)
    if value is None:
        return False
    return pool_spec.flag(value, f"{at}.{field}")


def _count(value: Any, field: str) -> int:
    return pool_spec.bounded_int(value, field, pool_spec.MAX_QUANTITY)


def _bounds(
    given: Mapping[str, Any], roles: Mapping[str, bool], at: str
) -> tuple[int, int] | tuple[None, None]:
    low, high = given.get("autoscalingMinSize"), given.get("autoscalingMaxSize")
    if low is None and high is None:
        return None, None
    if low is None or high is None:
        missing = "autoscalingMinSize" if low is None else "autoscalingMaxSize"
        raise Invalid(
            f"{at}: autoscalingMinSize and autoscalingMaxSize are given together or not at all",
            f"{at}.{missing}",
        )
    min_size = _count(low, f"{at}.autoscalingMinSize")
    max_size = _count(high, f"{at}.autoscalingMaxSize")
    if min_size > max_size:
        raise Invalid(
            f"{at}.autoscalingMinSize ({min_size}) must not exceed autoscalingMaxSize ({max_size})",
            f"{at}.autoscalingMinSize",
        )
    if min_size < 1 and (roles["etcdRole"] or roles["controlPlaneRole"]):
        raise Invalid(
            f"{at}.autoscalingMinSize of an etcd or control-plane pool must be at least 1",
            f"{at}.autoscalingMinSize",
        )
    return min_size, max_size


def _template(value: Any, at: str) -> str:
    if not isinstance(value, dict):
        raise Invalid(f"{at} is required: {{kind: {TEMPLATE_KIND}, name}}", at, "MissingRequired")
    kind = value.get("kind", TEMPLATE_KIND)
    if kind != TEMPLATE_KIND:
        raise Invalid(
            f"{at}.kind must be {TEMPLATE_KIND}: machines are made from node templates",
            f"{at}.kind",
            code="InvalidOption",
        )
    if value.get("namespace"):
        raise Invalid(
            f"{at}.namespace: node templates belong to their creator, not to a namespace; "
            "leave it out",
            f"{at}.namespace",
        )
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise Invalid(f"{at}.name is required", f"{at}.name", code="MissingRequired")
    for key in value:
        if key not in ("kind", "name", "namespace", "apiVersion"):
            raise Invalid(f"{at}.{key} is not a field of a reference", f"{at}.{key}")
    return name


def prefix(cluster_name: str, pool_name: str) -> str:
    """The hostname prefix of a pool's machines: hostnames are it and a number."""
    return f"{cluster_name}-{pool_name}-"


def role_labels(pool: MachinePool) -> dict[str, str]:
    flags = {"etcdRole": pool.etcd, "controlPlaneRole": pool.control_plane,
             "workerRole": pool.worker}  # fmt: skip
    return {label: "true" for field, on in flags.items() if on for label in ROLES[field][1]}


def nodepool_spec(pool: MachinePool, cluster_id: str, cluster_name: str) -> dict[str, Any]:
    """The spec of the NodePool that is `pool` of cluster `cluster_id`."""
    spec: dict[str, Any] = {
        "clusterName": cluster_id,
        "machinePoolName": pool.name,
        "displayName": pool.name,
        "hostnamePrefix": prefix(cluster_name, pool.name),
        "quantity": pool.quantity,
        "etcd": pool.etcd,
        "controlPlane": pool.control_plane,
        "worker": pool.worker,
        "nodeTemplateName": pool.template,
        "nodeLabels": role_labels(pool),
        "drainBeforeDelete": pool.drain_before_delete,
    }
    if pool.min_size is not None:
        spec |= {"autoscalingMinSize": pool.min_size, "autoscalingMaxSize": pool.max_size}
    return spec


def of_nodepool(spec: Mapping[str, Any]) -> MachinePool:
    """The machine pool a NodePool (with `machinePoolName`) is."""
    return MachinePool(
        name=str(spec.get("machinePoolName", "")),
        quantity=int(spec.get("quantity", 1)),
        etcd=bool(spec.get("etcd")),
        control_plane=bool(spec.get("controlPlane")),
        worker=bool(spec.get("worker")),
        drain_before_delete=bool(spec.get("drainBeforeDelete")),
        template=str(spec.get("nodeTemplateName", "")),
        min_size=spec.get("autoscalingMinSize"),
        max_size=spec.get("autoscalingMaxSize"),
    )


# Fields of a NodePool a PUT of its machine pool may change: everything else is fixed by the
# pool's name and roles.
_CHANGEABLE = ("quantity", "nodeTemplateName", "drainBeforeDelete", "autoscalingMinSize",
               "autoscalingMaxSize")  # fmt: skip


def changes(current: Mapping[str, Any], desired: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch operations that turn NodePool spec `current` into `desired` (same pool)."""
    ops: list[dict[str, Any]] = []
    for field in _CHANGEABLE:
        if field in desired and current.get(field) != desired[field]:
            ops.append({"op": "add", "path": f"/spec/{field}", "value": desired[field]})
        elif field not in desired and field in current:
            ops.append({"op": "remove", "path": f"/spec/{field}"})
    return ops


def role_change(current: MachinePool, desired: MachinePool) -> str | None:
    """The first role field `desired` changes: roles are fixed once a pool exists."""
    for field, was, now in (
        ("etcdRole", current.etcd, desired.etcd),
        ("controlPlaneRole", current.control_plane, desired.control_plane),
        ("workerRole", current.worker, desired.worker),
    ):
        if was != now:
            return field
    return None


@dataclass(frozen=True)
class Plan:
    create: list[MachinePool]
    update: list[tuple[Mapping[str, Any], MachinePool]]  # (existing NodePool, desired)
    delete: list[Mapping[str, Any]]  # existing NodePools


def plan(existing: Iterable[Mapping[str, Any]], desired: list[MachinePool]) -> Plan:
    """What makes the cluster's NodePools (`existing`, those with a `machinePoolName`) the
    `desired` pools: matched by name."""
    by_name = {(p.get("spec") or {}).get("machinePoolName"): p for p in existing}
    wanted = {pool.name for pool in desired}
    return Plan(
        create=[pool for pool in desired if pool.name not in by_name],
        update=[(by_name[pool.name], pool) for pool in desired if pool.name in by_name],
        delete=[obj for name, obj in sorted(by_name.items()) if name not in wanted],
    )


def pools_hash(pools: Iterable[MachinePool]) -> str:
    """A digest of the pools, kept on the Cluster so that the view's resourceVersion moves
    with them (`v1.resource_version`)."""
    shown = sorted((pool.shown() for pool in pools), key=lambda p: str(p["name"]))
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:32]
