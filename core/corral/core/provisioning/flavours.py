"""The two flavours of provisioned cluster, `rke2` and `k3s` (docs/provisioning.md).

Both run the same upstream control plane; a flavour decides its configuration's field, which
pod network (CNI) the cluster's machines get, which it gets when none is given, and which
it may not have yet. corral installs the plugin (core/provisioning/network.py).
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
    # The flavour's own plugins corral does not install yet: refused, saying so.
    not_yet: tuple[str, ...]
    example_version: str  # as the flavour's own clients write it


RKE2 = Flavour(
    drivers.RKE2, "rke2Config", "canal", ("canal", "none"), ("calico", "cilium"), "v1.36.3+rke2r1"
)
K3S = Flavour(drivers.K3S, "k3sConfig", "flannel", ("flannel", "none"), (), "v1.36.3+k3s1")
FLAVOURS = {flavour.driver: flavour for flavour in (RKE2, K3S)}
