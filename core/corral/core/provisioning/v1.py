"""The `/v1` view of a provisioned cluster, `provisioning.svc.io/v1` `Cluster` (docs/api.md,
"Provisioning clusters"): what it shows of the management Cluster and its machine pools, and
what a create or update may say.

There is no second custom resource: the view's truth is the Cluster and its NodePools. Its
`(namespace, name)` is held by two labels on the Cluster; a cluster made through `/v3` has none
and shows as `fleet-default/<cluster id>` (Rancher's namespace). The Cluster of a view made
through `/v1` is named from a hash of that pair, so Kubernetes itself refuses a second one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.api import drivers, ids
from corral.core.errors import Invalid
from corral.core.provisioning import machinepools
from corral.core.provisioning.flavours import FLAVOURS, K3S, RKE2
from corral.core.provisioning.machinepools import MachinePool

GROUP = "provisioning.svc.io"
API_VERSION = f"{GROUP}/v1"
KIND = "Cluster"
SCHEMA_ID = f"{GROUP}.cluster"  # Steve's `<group>.<lower-case kind>`
PLURAL = f"{GROUP}.clusters"  # and `<group>.<resource>`
DEFAULT_NAMESPACE = "fleet-default"
LABEL_NAMESPACE = f"{GROUP}/namespace"
LABEL_NAME = f"{GROUP}/name"
# A digest of the machine pools, written with every change of them through the view: the
# view's resourceVersion then moves with the pools.
ANNOTATION_POOLS_HASH = f"{GROUP}/pools-hash"
# What the view's resourceVersion is made of, so what a conditional update is written on
# condition of: the Cluster's generation (its spec) and the pools' digest.
VERSION_READS = (("metadata", "generation"), ("metadata", "annotations", ANNOTATION_POOLS_HASH))
POOLS = "spec.rkeConfig.machinePools"
# Where spec 4.4's body gives the same pools: `{"machinePools": [...]}`.
SPEC_POOLS = "machinePools"
# Cluster spec fields shown under rkeConfig, changed through /v3's actions only.
SHOWN_ONLY = ("etcdSnapshotRestore", "rotateCertificates")
SPEC_FIELDS = frozenset(
    {"kubernetesVersion", "rkeConfig", *(f.config_field for f in FLAVOURS.values())}
)
RKE_CONFIG_FIELDS = frozenset({"machinePools", "networking", *SHOWN_ONLY})


def is_type(text: str) -> bool:
    """Whether a path's type names this view: singular or plural, in any case (Steve's
    `LookupSchema`)."""
    return text.lower() in (SCHEMA_ID, PLURAL)


def name_of(cluster: Mapping[str, Any]) -> tuple[str, str]:
    """The view's (namespace, name) of a Cluster."""
    meta = cluster["metadata"]
    labels = meta.get("labels") or {}
    if LABEL_NAMESPACE in labels and LABEL_NAME in labels:
        return labels[LABEL_NAMESPACE], labels[LABEL_NAME]
    return DEFAULT_NAMESPACE, meta["name"]


def key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def check_labels(given: Mapping[str, str], current: Mapping[str, str]) -> None:
    """The view's name is its own: labels of `/v3` may not set or change it."""
    for label in (LABEL_NAMESPACE, LABEL_NAME):
        if label in given and given[label] != current.get(label):
            raise Invalid(
                f"the label {label} holds the cluster's /v1 name; it is set only through /v1 "
                "and cannot change",
                "labels",
                code="InvalidAction",
            )


def cluster_id(namespace: str, name: str) -> str:
    """The Cluster of a view made through /v1: the same pair always gives the same id."""
    return ids.derived("c-m", namespace, name, length=8)


def resource_version(cluster: Mapping[str, Any]) -> str:
    """The view's `metadata.resourceVersion`: `<generation>.<pools>`, the Cluster's generation
    (which moves with any change of its spec) and the start of its machine pools' digest as
    last put through the view. Not the Cluster's resourceVersion: the operator's status writes
    move that all the time, and a client's conditional update must not lose to them. Opaque to
    clients, as any resourceVersion."""
    meta = cluster["metadata"]
    pools = (meta.get("annotations") or {}).get(ANNOTATION_POOLS_HASH) or "0"
    return f"{meta.get('generation', 1)}.{pools[:12]}"


def checked_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid(f"{field} is required", field, code="MissingRequired")
    if not ids.is_dns_label(value):
        raise Invalid(
            f"{field} must be a DNS label: at most {ids.MAX_LABEL} lower-case letters, digits "
            "or '-', starting and ending with a letter or digit",
            field,
        )
    return value


def render(
    cluster: Mapping[str, Any], pools: Iterable[MachinePool], state: tuple[str, str, str]
) -> dict[str, Any]:
    """The view of `cluster` with its machine `pools` and its /v3 `state`, shaped as a
    Kubernetes object (before the `/v1` envelope)."""
    meta, spec = cluster["metadata"], cluster.get("spec") or {}
    status = cluster.get("status") or {}
    namespace, name = name_of(cluster)
    current, transitioning, message = state
    flavour = FLAVOURS[spec["driver"]]
    config = spec.get(flavour.config_field) or {}
    rke_config: dict[str, Any] = {
        "machinePools": [pool.shown() for pool in sorted(pools, key=lambda p: p.name)],
    }
    if "networking" in config:
        rke_config["networking"] = config["networking"]
    rke_config |= {field: spec[field] for field in SHOWN_ONLY if field in spec}
    conditions = sorted(status.get("conditions") or [], key=lambda c: str(c.get("type", "")))
    labels = {
        k: v
        for k, v in (meta.get("labels") or {}).items()
        if k not in (LABEL_NAMESPACE, LABEL_NAME)
    }
    shown_meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": meta.get("uid", ""),
        "resourceVersion": resource_version(cluster),
        "generation": meta.get("generation", 1),
        "creationTimestamp": meta.get("creationTimestamp", ""),
        "labels": labels,
        "state": {
            "name": current,
            "error": transitioning == "error",
            "transitioning": transitioning == "yes",
            "message": message,
        },
    }
    if meta.get("deletionTimestamp"):
        shown_meta["deletionTimestamp"] = meta["deletionTimestamp"]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": shown_meta,
        "spec": {
            "kubernetesVersion": spec.get("kubernetesVersion", ""),
            flavour.config_field: config,
            "rkeConfig": rke_config,
        },
        "status": {
            "clusterName": meta["name"],
            "ready": any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            ),
            "conditions": conditions,
            "observedGeneration": status.get("observedGeneration", 0),
        },
    }


@dataclass(frozen=True)
class Given:
    """What a create or update body says of the view."""

    namespace: str | None  # metadata.namespace, when given
    name: str | None  # metadata.name, when given
    resource_version: str | None
    driver: str | None  # the flavour a configuration names; None: none named
    config: dict[str, Any] | None  # spec.rke2Config or spec.k3sConfig
    version: Any  # spec.kubernetesVersion as given; None when not given
    networking: Any  # spec.rkeConfig.networking as given; None when not given
    pools: Any  # the machine pools as given, unchecked (`machine_pools`); None: not given
    pools_at: str  # where the body gives them: POOLS or SPEC_POOLS


def parse(body: Mapping[str, Any]) -> Given:
    """The body of a create or update, checked field by field but for its machine pools,
    which `machine_pools` checks against the pools that exist."""
    if "type" in body and not (isinstance(body["type"], str) and is_type(body["type"])):
        raise Invalid(f"type must be {SCHEMA_ID}", "type")
    for field, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if field in body and body[field] != expected:
            raise Invalid(f"{field} must be {expected}", field)
    meta = _object(body.get("metadata"), "metadata")
    namespace = meta.get("namespace")
    if namespace is not None:
        namespace = checked_name(namespace, "metadata.namespace")
    name = meta.get("name")
    if name is not None:
        name = checked_name(name, "metadata.name")
    resource_version = meta.get("resourceVersion")
    if resource_version is not None and not isinstance(resource_version, str):
        raise Invalid("metadata.resourceVersion must be text", "metadata.resourceVersion")
    spec = _object(body.get("spec"), "spec")
    for field in spec:
        driver = drivers.CONFIGS.get(field)
        if driver in drivers.NOT_INSTALLED:
            raise Invalid(drivers.refusal(driver), f"spec.{field}", code="InvalidOption")
        if field not in SPEC_FIELDS:
            raise Invalid(
                f"spec.{field} is not a field of this view; the fields are "
                f"{', '.join(sorted(SPEC_FIELDS))}",
                f"spec.{field}",
            )
    configs = [f for f in (RKE2, K3S) if spec.get(f.config_field) is not None]
    if len(configs) > 1:
        raise Invalid(
            f"give one cluster configuration, not {', '.join(f.config_field for f in configs)}",
            f"spec.{configs[1].config_field}",
        )
    rke_config = _object(spec.get("rkeConfig"), "spec.rkeConfig")
    for field in rke_config:
        if field not in RKE_CONFIG_FIELDS:
            raise Invalid(
                f"spec.rkeConfig.{field} is not a field of this view; the fields are "
                f"{', '.join(sorted(RKE_CONFIG_FIELDS))}",
                f"spec.rkeConfig.{field}",
            )
    pools, pools_at = rke_config.get("machinePools"), POOLS
    if body.get(SPEC_POOLS) is not None:
        if pools is not None:
            raise Invalid(
                f"give the machine pools once: {SPEC_POOLS} or {POOLS}, not both", SPEC_POOLS
            )
        pools, pools_at = body[SPEC_POOLS], SPEC_POOLS
    return Given(
        namespace=namespace,
        name=name,
        resource_version=resource_version or None,
        driver=configs[0].driver if configs else None,
        config=spec[configs[0].config_field] if configs else None,
        version=spec.get("kubernetesVersion"),
        networking=rke_config.get("networking"),
        pools=pools,
        pools_at=pools_at,
    )


def machine_pools(
    given: Given, cluster_name: str, existing: Iterable[MachinePool] = ()
) -> list[MachinePool] | None:
    """The machine pools `given` asks for, checked (Invalid naming the field where the body
    gave them) for the view `cluster_name` whose pools are `existing`; None when it gives
    none."""
    if given.pools is None:
        return None
    return machinepools.parse(given.pools, cluster_name, given.pools_at, existing)


def flavour_of(given: Given) -> str:
    """The flavour of a new cluster: the configuration it gives, else the version's suffix
    (`+k3s1`), else rke2 (Rancher's default)."""
    if given.driver is not None:
        return given.driver
    version = given.version if isinstance(given.version, str) else ""
    return K3S.driver if "+k3s" in version else RKE2.driver


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid(f"{field} must be an object", field)
    return value
