"""What a machine sends to `/v3/connect/register`, checked (docs/design/real-machines.md):
`{"hostname", "address", "internalAddress", "roles", "labels", "taints"}` and the settings
of its own the installer passes on (`cgroupDriver`, `cgroupRoot`, `containerdSocket`)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.api import ids
from corral.core.api.labels import user_labels
from corral.core.clusters import taints as node_taints
from corral.core.errors import Invalid
from corral.core.registration.bundle import CGROUP_DRIVERS, DEFAULT_SOCKET

WORKER = "worker"
# The control plane of a corral cluster is hosted: a machine cannot be part of it.
HOSTED_ROLES = ("etcd", "controlplane")
MAX_PATH = 256
# A kubelet given a label of Kubernetes' own namespaces (`kubernetes.io`, `k8s.io` and their
# subdomains) does not start unless the label is one of these (k8s.io/kubelet's
# IsKubeletLabel): such a label is refused at registration, not left to a kubelet that fails.
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
})  # fmt: skip
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
KUBERNETES_NAMESPACES = ("kubernetes.io", "k8s.io")
_PATH = re.compile(r"/[A-Za-z0-9._/-]*", re.ASCII)


@dataclass(frozen=True)
class Registration:
    hostname: str
    address: str = ""
    internal_address: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    cgroup_driver: str = "systemd"
    cgroup_root: str = ""
    containerd_socket: str = DEFAULT_SOCKET


def parse(body: Mapping[str, Any]) -> Registration:
    hostname = body.get("hostname")
    if not isinstance(hostname, str) or not hostname:
        raise Invalid("hostname is required", "hostname", code="MissingRequired")
    if hostname != hostname.lower() or not ids.is_dns_subdomain(hostname):
        raise Invalid("hostname must be a lowercase DNS name (RFC 1123) of at most 253 "
                      "characters", "hostname")  # fmt: skip
    _roles(body.get("roles", [WORKER]))
    driver = body.get("cgroupDriver", "systemd")
    if driver not in CGROUP_DRIVERS:
        raise Invalid(f"cgroupDriver must be one of {', '.join(CGROUP_DRIVERS)}", "cgroupDriver",
                      code="InvalidOption")  # fmt: skip
    return Registration(
        hostname=hostname,
        address=_address(body, "address"),
        internal_address=_address(body, "internalAddress"),
        labels=_labels(body.get("labels")),
        taints=tuple(node_taints.parse(body.get("taints") or [], "taints")),
        cgroup_driver=str(driver),
        cgroup_root=_path(body, "cgroupRoot", ""),
        containerd_socket=_path(body, "containerdSocket", DEFAULT_SOCKET),
    )


def _labels(value: Any) -> dict[str, str]:
    labels = user_labels(value)
    for key in labels:
        if not kubelet_may_set(key):
            raise Invalid(
                f"labels: {key[:128]} is of Kubernetes' own namespaces and not one a kubelet "
                "may give its node: the kubelet would not start",
                "labels",
            )
    return labels


def kubelet_may_set(key: str) -> bool:
    """Whether a kubelet starts with this label in its `--node-labels`."""
    namespace = key.rpartition("/")[0]

    def within(parent: str) -> bool:
        return namespace == parent or namespace.endswith("." + parent)

    if not any(within(n) for n in KUBERNETES_NAMESPACES):
        return True
    return key in KUBELET_LABELS or any(within(n) for n in KUBELET_LABEL_NAMESPACES)


def _roles(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        raise Invalid("roles must be a list of roles", "roles")
    hosted = sorted(set(value) & set(HOSTED_ROLES))
    if hosted:
        raise Invalid(f"a machine cannot take the roles {', '.join(hosted)}: the control plane "
                      "of this cluster is hosted by corral; join it as a worker", "roles",
                      code="InvalidOption")  # fmt: skip
    if value != [WORKER]:
        raise Invalid('roles must be ["worker"]', "roles", code="InvalidOption")


def _address(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name) or ""
    if not isinstance(value, str):
        raise Invalid(f"{name} must be an IP address", name)
    if not value:
        return ""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise Invalid(f"{name} must be an IP address, not {value[:64]!r}", name) from None


def _path(body: Mapping[str, Any], name: str, default: str) -> str:
    value = body.get(name) or default
    if not value:
        return ""
    if (not isinstance(value, str) or len(value) > MAX_PATH or not _PATH.fullmatch(value)
            or "/../" in f"{value}/"):  # fmt: skip
        raise Invalid(f"{name} must be an absolute path of letters, digits, '.', '_', '-' "
                      f"and '/', at most {MAX_PATH} characters", name)  # fmt: skip
    return value
