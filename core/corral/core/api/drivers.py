"""A Cluster's drivers (`spec.driver`): how corral comes to reach the cluster, and which of
them it makes itself. Every place that tells drivers apart reads them here.

- `imported`: the user's kubeconfig gives corral its own credential, or the cluster waits for
  one; `local`: the management cluster itself, registered by corral alone;
- `rke2` and `k3s` (`HOSTED`): corral runs the control plane (docs/provisioning.md);
- `AKS`, `EKS`, `GKE` and the legacy engine: stored only, until a provider for them exists.
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
# The drivers whose control plane corral runs itself.
HOSTED = frozenset({RKE2, K3S})
# The drivers of clusters a provisioner makes rather than an import: of these, only HOSTED
# are made; the others are stored only.
PROVISIONED = frozenset({*HOSTED, AKS, EKS, GKE, LEGACY})
