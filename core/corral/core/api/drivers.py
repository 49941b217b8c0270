"""A Cluster's drivers (`spec.driver`): how corral comes to reach the cluster, and which of
them it makes itself. Every place that tells drivers apart reads them here.

- `imported`: the user's kubeconfig gives corral its own credential, or the cluster waits for
  one; `local`: the management cluster itself, registered by corral alone;
- `rke2` and `k3s` (`HOSTED`): corral runs the control plane (docs/provisioning.md);
- `AKS`, `EKS`, `GKE` (`NOT_INSTALLED`): hosted Kubernetes services no provider of corral's
  makes; a create that asks for one is refused, and one stored around the API (kubectl, an
  older version) says what to do instead;
- the legacy engine: deprecated, refused, and on a stored cluster said so.
"""

from __future__ import annotations

IMPORTED = "imported"
LOCAL = "local"
RKE2 = "rke2"
K3S = "k3s"
AKS = "AKS"
EKS = "EKS"
GKE = "GKE"
# The legacy engine (spec 2.3): accepted on stored clusters, marked deprecated, never made.
LEGACY = "svcKubernetesEngine"
DEPRECATED = (
    f"{LEGACY} is the legacy engine, deprecated: clusters are provisioned as {RKE2} or {K3S} "
    "(provisioning.svc.io/v1)"
)

# The configuration a create body gives for each driver a client may ask for.
CONFIGS = {
    "importedConfig": IMPORTED,
    "rke2Config": RKE2,
    "k3sConfig": K3S,
    "aksConfig": AKS,
    "eksConfig": EKS,
    "gkeConfig": GKE,
}
ALL = (*CONFIGS.values(), LOCAL, LEGACY)
# Hosted Kubernetes services: no provider for them is installed, so corral makes none of them.
NOT_INSTALLED = (AKS, EKS, GKE)
# The drivers whose control plane corral runs itself.
HOSTED = frozenset({RKE2, K3S})
# The drivers of clusters a provisioner makes rather than an import: of these, only HOSTED
# are made; the others are stored only.
PROVISIONED = frozenset({*HOSTED, AKS, EKS, GKE, LEGACY})


def not_installed(name: str) -> str | None:
    """The driver of `NOT_INSTALLED` that `name` names in any case (`aks`, `Eks`); None for
    another name."""
    return next((driver for driver in NOT_INSTALLED if driver.lower() == name.lower()), None)


def refusal(driver: str) -> str:
    """Why a create that asks for `driver` (one of `NOT_INSTALLED`) is refused."""
    return (
        f"no provider for {driver} clusters is installed in corral, so it cannot make one; "
        f"import an existing {driver} cluster instead (importedConfig.kubeConfig), or have "
        f"corral provision an {RKE2} or {K3S} cluster"
    )


def never_provisioned(driver: str) -> str:
    """What a stored cluster whose driver corral cannot provision (`PROVISIONED - HOSTED`)
    tells its owner to do."""
    why = f"no provider for {driver} clusters is installed in corral"
    if driver == LEGACY:
        why = DEPRECATED
    return (
        f"{why}; this cluster will never be provisioned: delete it, and import the cluster "
        f"(importedConfig.kubeConfig) or have corral provision an {RKE2} or {K3S} one instead"
    )
