"""The two flavours of provisioned cluster, `rke2` and `k3s` (docs/provisioning.md).

Both run the same upstream control plane; a flavour decides its configuration's field, which
network plugins a cluster may record and which it records when none is given. No CNI is
installed: the plugin is recorded only, for the day real worker machines need one.
"""

from __future__ import annotations

from dataclasses import dataclass

from corral.core.api import drivers


@dataclass(frozen=True)
class Flavour:
    driver: str
    config_field: str  # the create body's configuration: rke2Config, k3sConfig
    default_plugin: str
    plugins: tuple[str, ...]
    example_version: str  # as the flavour's own clients write it


RKE2 = Flavour(
    drivers.RKE2, "rke2Config", "canal", ("canal", "calico", "cilium", "none"), "v1.36.3+rke2r1"
)
K3S = Flavour(drivers.K3S, "k3sConfig", "flannel", ("flannel", "none"), "v1.36.3+k3s1")
FLAVOURS = {flavour.driver: flavour for flavour in (RKE2, K3S)}
