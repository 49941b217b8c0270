"""The one write path of a Cluster, for every driver and both views (`/v3/clusters` and
`/v1/provisioning.svc.io.clusters`): creation (`create` for a `/v3` body, `make` for what any
view decided), the `/v3` update, the guarded writes every action and the `/v1` view go through
(`write`), and deletion.

A create or update checks everything before it writes anything, so a refused request changes
nothing; an import happens synchronously (`services.importing`), so that a bad kubeconfig or an
unreachable server is answered at once and nothing is stored.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Iterable
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authz import Caller, require_admin
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import name_text
from corral.apiserver.services import clusterspec, importing, owned
from corral.apiserver.services import upgrade as upgrading
from corral.apiserver.services.clusterspec import CUSTOMIZATIONS, PSA_TEMPLATE
from corral.apiserver.services.visibility import require_cluster_owner
from corral.core import errors, jsonpatch, kubeconfig
from corral.core.api import drivers, ids, names
from corral.core.kube import guarded, kinds, registration_tokens
from corral.core.kube.client import as_dict, delete_if_present, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.projects import podsecurity
from corral.core.provisioning import admission, upgrade
from corral.core.provisioning.admission import Admitted
from corral.core.provisioning.flavours import FLAVOURS, Flavour

GENERATE_KUBECONFIG = "generateKubeconfig"


def may_create(who: Caller) -> None:
    require_admin(who, "create clusters")


def admit(deps: Deps, who: Caller, flavour: Flavour, config: Any, version: Any) -> Admitted:
    """The configuration and version of a new rke2 or k3s cluster as they are stored; 422
    naming the field at fault, and for an S3 target of its backups the caller may not use."""
    admitted = admission.admit(flavour, config, version, deps.stores.catalog())
    owned.check_s3_target(deps, who, admitted.config, flavour.config_field)
    return admitted


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    """A new cluster as a `/v3` body asks: its driver decided by the configuration given, an
    import done at once, a provisioned cluster's configuration admitted."""
    may_create(who)
    if body.get("type", "cluster") != "cluster":
        raise errors.invalid("type", "type must be cluster")
    display = name_text(body, "displayName") or name_text(body, "name")
    if not display:
        raise errors.missing("displayName")
    driver = clusterspec.driver_of(body)
    spec: dict[str, Any] = {"displayName": display, "driver": driver}
    spec |= clusterspec.updatable_spec(body)
    if (flavour := FLAVOURS.get(driver)) is not None:
        given = body.get(flavour.config_field)
        admitted = admit(deps, who, flavour, given, spec.get("kubernetesVersion"))
        spec["kubernetesVersion"] = admitted.version
        spec[flavour.config_field] = admitted.config
    for config, config_driver in drivers.CONFIGS.items():
        # A driver given alone (spec 2.3: every configuration is optional) stores none.
        if config_driver == driver and config not in spec and body.get(config) is not None:
            spec[config] = body[config]
    labels = clusterspec.labels_of(body)
    if driver == drivers.IMPORTED and (given := clusterspec.given_kubeconfig(body)) is not None:
        created = await importing.import_cluster(deps, given, spec, labels)
        deps.stores.clusters.put(created)
    else:
        name = ids.generate("c") if driver == drivers.IMPORTED else f"c-m-{ids.random_suffix(8)}"
        created = await make(deps, name, spec, labels, taken=f"cluster {name} already exists")
    if driver == drivers.IMPORTED:
        await registration(deps, created["metadata"]["name"])
    return created


async def registration(deps: Deps, cluster: str) -> None:
    """An imported cluster is registered by its agent: its `default-token` shows the manifest
    to apply there (docs/design/cluster-agent.md, section 8); one imported by kubeconfig
    switches to the agent by it. The token lives in the cluster's namespace, made here rather
    than waiting for the operator."""
    await ensure_namespace(deps.kube, cluster, {names.LABEL_CLUSTER: cluster})
    await registration_tokens.ensure_default(
        deps.kube, cluster, datetime.datetime.now(datetime.UTC)
    )


async def make(
    deps: Deps,
    name: str,
    spec: dict[str, Any],
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    *,
    taken: str,
) -> Obj:
    """The Cluster `name` as a view decided it, checked already; 409 saying `taken` when the
    name is (or is still being deleted)."""
    # The operator's finalizer from the start: a cluster deleted before the operator first
    # saw it still has what corral keeps for it removed.
    meta = ObjectMeta(
        name=name, labels=labels, annotations=annotations, finalizers=[names.FINALIZER_OPERATOR]
    )
    try:
        created = as_dict(await deps.kube.create(kinds.Cluster(metadata=meta, spec=spec)))
    except KubeApiError as exc:
        if exc.status.code == 409:
            raise errors.conflict(taken) from None
        raise
    deps.stores.clusters.put(created)
    return created


def may_change(who: Caller, cluster: Obj) -> None:
    require_cluster_owner(who, cluster["metadata"]["name"], "change it")


async def update(deps: Deps, who: Caller, obj: Obj, body: dict[str, Any]) -> Obj:
    """The cluster as a `/v3` PUT gives it: the fields it may change, a version roll of a
    provisioned cluster, the import of a cluster waiting for one."""
    may_change(who, obj)
    spec = obj.get("spec") or {}
    given = clusterspec.given_kubeconfig(body) if awaits_import(deps, obj) else None
    if given is not None:
        body = {k: v for k, v in body.items() if k not in ("importedConfig", "kubeConfig")}
    for field in sorted(clusterspec.IMMUTABLE & set(body)):
        if field == "driver" and body[field] == spec.get("driver"):
            continue
        raise errors.invalid(
            field, f"{field} cannot be changed after the cluster is created", code="InvalidAction"
        )
    patch = clusterspec.updatable_spec(body)
    template = patch.get(PSA_TEMPLATE, spec.get(PSA_TEMPLATE, ""))
    if template != spec.get(PSA_TEMPLATE, "") and not podsecurity.may_set_template(
        template, who.is_admin
    ):
        raise errors.forbidden(f"only administrators may set {PSA_TEMPLATE} {template}")
    flavour = FLAVOURS.get(spec.get("driver", ""))
    version = patch.pop("kubernetesVersion") if flavour is not None and (
        "kubernetesVersion" in patch) else None  # fmt: skip
    display = name_text(body, "displayName") or name_text(body, "name")
    if display:
        patch["displayName"] = display
    labels = (
        clusterspec.labels_of(body, obj["metadata"].get("labels")) if "labels" in body else None
    )
    # Everything else was checked first: an import or a version change is not half of a
    # refused request.
    if flavour is not None and version is not None:
        obj = await change_version(deps, obj, flavour, version)
    if given is not None:
        obj = await importing.import_into(deps, given, obj)
        deps.stores.clusters.put(obj)
    merge: dict[str, Any] = {"spec": {**patch}}
    for name in CUSTOMIZATIONS:
        # A customization given replaces the stored one whole, not merged into it.
        if name in patch:
            merge["spec"][name] = clusterspec.replacing(spec.get(name), patch[name])
    if labels is not None:
        merge["metadata"] = {"labels": labels}
    if patch or labels is not None:
        obj = as_dict(
            await deps.kube.patch(
                kinds.Cluster, obj["metadata"]["name"], merge, patch_type=PatchType.MERGE
            )
        )
        deps.stores.clusters.put(obj)
    return obj


def awaits_import(deps: Deps, obj: Obj) -> bool:
    """An imported cluster corral has no credential for: made with no configuration, it is
    imported by the first PUT that gives a kubeconfig."""
    name = obj["metadata"]["name"]
    return (obj.get("spec") or {}).get("driver") == drivers.IMPORTED and (
        deps.connections.credential(name) is None
    )


async def change_version(deps: Deps, obj: Obj, flavour: Flavour, given: Any) -> Obj:
    """The cluster with `spec.kubernetesVersion` (and its configuration's) moved to `given`,
    or as it is when `given` names its version; 422 or 409 (`upgrade.admit`) writes nothing."""

    async def decide(current: Obj) -> list[jsonpatch.Operation]:
        return upgrading.operations(deps, current, flavour, given)

    return await write(deps, obj["metadata"]["name"], decide, upgrade.READS)


async def write(
    deps: Deps, name: str, decide: guarded.Decide, reads: Iterable[jsonpatch.Path]
) -> Obj:
    """The Cluster as `decide` changes it, decided on the Cluster as stored now and written on
    condition that what it `reads` is still so (`core.kube.guarded`): the operator's status
    writes, which are none of that, neither make the write fail nor are undone by it."""
    stored = await guarded.patch(deps.kube, kinds.Cluster, name, decide, reads)
    deps.stores.clusters.put(stored)
    return stored


def require_provisioned(cluster: Obj, action: str) -> None:
    """422 unless corral runs the cluster's etcd and certificates."""
    driver = (cluster.get("spec") or {}).get("driver")
    if driver not in drivers.HOSTED:
        raise errors.Invalid(
            f"{action} needs a cluster that corral provisions ({drivers.RKE2} or {drivers.K3S}); "
            f"this cluster is {driver}, and its etcd and certificates are managed outside corral",
            code="InvalidAction",
        )


def kubeconfig_for(deps: Deps, cluster: Obj, token: str, base: str) -> str:
    """A kubeconfig for kubectl through corral's proxy with `token`, base64-encoded; with the
    cluster's own endpoint too when its local cluster auth endpoint is enabled."""
    cluster_id = cluster["metadata"]["name"]
    config = kubeconfig.build(
        cluster_id,
        f"{base}/k8s/clusters/{cluster_id}",
        deps.corral_ca,
        kubeconfig.Credentials(token=token),
    )
    endpoint = (cluster.get("spec") or {}).get("localClusterAuthEndpoint") or {}
    if endpoint.get("enabled"):
        direct = f"{cluster_id}-fqdn"
        ca = endpoint.get("caCerts", "").encode() or None
        config["clusters"].append(
            {
                "name": direct,
                "cluster": {
                    "server": f"https://{endpoint['fqdn']}",
                    **({"certificate-authority-data": base64.b64encode(ca).decode()} if ca else {}),
                },
            }
        )
        config["contexts"].append(
            {"name": direct, "context": {"cluster": direct, "user": cluster_id}}
        )
    return base64.b64encode(kubeconfig.dump(config).encode()).decode()


def may_delete(who: Caller, obj: Obj) -> None:
    require_cluster_owner(who, obj["metadata"]["name"], "delete it")
    if obj["metadata"]["name"] == names.LOCAL_CLUSTER:
        raise errors.Unsupported("the local cluster cannot be deleted")


def may_act(who: Caller, obj: Obj, action: str) -> None:
    """Whoever sees a cluster generates a kubeconfig for it; its owners take the other
    actions, which need a cluster whose etcd and certificates corral runs."""
    if action == GENERATE_KUBECONFIG:
        return
    require_cluster_owner(who, obj["metadata"]["name"], action)
    require_provisioned(obj, action)


async def delete(deps: Deps, who: Caller, obj: Obj) -> None:
    """Deletes the cluster: the operator then removes its machines, pools, control plane and
    namespace (`management.clusters.forget_cluster`)."""
    may_delete(who, obj)
    await delete_if_present(deps.kube, kinds.Cluster, obj["metadata"]["name"])
