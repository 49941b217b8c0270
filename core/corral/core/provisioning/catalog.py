"""The Kubernetes versions corral can provision, and the images each runs (docs/provisioning.md).

The catalog is the setting `kubernetes-version-catalog`: a JSON object from a version
(`v1.36.3`) to its components, each an image and the command that starts it in that image:

    {"v1.36.3": {"kube-apiserver": {"image": "registry.k8s.io/kube-apiserver:v1.36.3",
                                    "command": ["/usr/local/bin/kube-apiserver"]}, ...}}

A version needs every component of REQUIRED; `kwok` is optional and, when present, keeps the
simulated nodes of the kwok node driver alive from inside the control plane. Flags are never
in the catalog: corral adds them, so one plan serves the upstream images and the local ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.errors import Invalid

# The Setting that holds the catalog.
SETTING = "kubernetes-version-catalog"

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
ETCDCTL = "etcdctl"
ETCDUTL = "etcdutl"
KWOK = "kwok"
# Copies snapshots to and from an S3-compatible target (docs/provisioning.md, "S3 targets"); a
# version without it takes backups onto the management cluster's volume only.
ETCD_S3 = "etcd-s3"
# The pod network of clusters whose machines are real (core/provisioning/network.py).
FLANNEL = "flannel"
NETWORK_POLICIES = "network-policies"
REQUIRED = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER, ETCDCTL, ETCDUTL)
# What else may run beside the control plane, and what runs on the cluster's own machines.
CONTROL_PLANE_OPTIONAL = (KWOK, ETCD_S3)
NETWORK = (FLANNEL, NETWORK_POLICIES)
OPTIONAL = (*CONTROL_PLANE_OPTIONAL, *NETWORK)
NODE = "node"
NODE_REQUIRED = ("kubelet", "kube-proxy", "cni-plugins")
NODE_OPTIONAL = ("images",)

# Bounds: a catalog is read on every provisioning pass and shown in /v3/settings.
MAX_BYTES = 16 * 1024  # a Setting holds at most this (its CRD and settings.MAX_VALUE)
MAX_VERSIONS = 64
MAX_IMAGE = 512
MAX_ARGS = 16
MAX_ARG = 256

VERSION = re.compile(r"v(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})", re.ASCII)
# What rke2 and k3s append to a Kubernetes version; their clients send it.
FLAVOUR_SUFFIX = {"rke2": re.compile(r"\+rke2r[0-9]{1,3}"), "k3s": re.compile(r"\+k3s[0-9]{1,3}")}
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:@+-]*", re.ASCII)
_ASSET_URL = re.compile(r"(https://[!-~]+|/assets/[A-Za-z0-9][A-Za-z0-9._-]*)", re.ASCII)
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
MAX_URL = 512

# corral's default: the upstream images of the version it is built with (untestable here:
# this machine reaches no registry; docs/provisioning.md says so).
UPSTREAM_VERSION = "v1.36.3"
UPSTREAM_ETCD = "registry.k8s.io/etcd:3.6.8-0"


@dataclass(frozen=True)
class Component:
    image: str
    command: tuple[str, ...]


@dataclass(frozen=True)
class NodeAsset:
    """A download a machine of the version needs: a `https://` url or a path under
    `/assets/` of corral's own, and the sha256 (hex) it must have."""

    url: str
    sha256: str


@dataclass(frozen=True)
class Release:
    version: str
    components: Mapping[str, Component]
    # What a real machine of the version downloads (docs/design/real-machines.md, section 1),
    # by name; None for a version that runs simulated workers only.
    node: Mapping[str, NodeAsset] | None = None

    def component(self, name: str) -> Component:
        return self.components[name]

    @property
    def simulates_nodes(self) -> bool:
        return KWOK in self.components


@dataclass(frozen=True)
class Catalog:
    releases: Mapping[str, Release]

    def release(self, version: str, field: str = "kubernetesVersion") -> Release:
        """The release of `version`; 422 listing what there is when the catalog lacks it."""
        found = self.releases.get(version)
        if found is None:
            known = ", ".join(sorted(self.releases, key=version_key)) or "none"
            raise Invalid(
                f"Kubernetes version {version} is not in the catalog (setting "
                f"kubernetes-version-catalog); versions: {known}",
                field,
                code="InvalidOption",
            )
        return found


def version_key(version: str) -> tuple[int, int, int]:
    match = VERSION.fullmatch(version)
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def normalise(given: str, driver: str, field: str = "kubernetesVersion") -> str:
    """The catalog key of a version as a client gives it: `v1.36.3`, `1.36.3`, or with the
    flavour's suffix (`v1.36.3+rke2r1` for rke2, `v1.36.3+k3s1` for k3s)."""
    text = given.strip() if isinstance(given, str) else ""
    suffix = FLAVOUR_SUFFIX.get(driver)
    if suffix is not None and "+" in text:
        base, _, tail = text.partition("+")
        if suffix.fullmatch("+" + tail) is None:
            raise Invalid(f"{given!r} is not a {driver} version", field, code="InvalidFormat")
        text = base
    if text and not text.startswith("v"):
        text = "v" + text
    if VERSION.fullmatch(text) is None:
        raise Invalid(
            f"kubernetesVersion must look like v1.36.3, not {given!r}", field, code="InvalidFormat"
        )
    return text


def parse(text: str) -> Catalog:
    """The catalog in `text`; Invalid (on field `value`) saying what is wrong."""
    if not isinstance(text, str) or len(text.encode()) > MAX_BYTES:
        raise _bad(f"must be JSON of at most {MAX_BYTES} bytes")
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise _bad(f"is not JSON: {exc}") from None
    if not isinstance(document, dict) or not document:
        raise _bad("must be a JSON object of at least one version")
    if len(document) > MAX_VERSIONS:
        raise _bad(f"may hold at most {MAX_VERSIONS} versions")
    releases = {}
    for version, components in document.items():
        if VERSION.fullmatch(version) is None:
            raise _bad(f"key {version!r} is not a version like v1.36.3")
        node = None
        if isinstance(components, dict) and NODE in components:
            components = {k: v for k, v in components.items() if k != NODE}
            node = _node(version, document[version][NODE])
        releases[version] = Release(version, _components(version, components), node)
    return Catalog(releases)


def _components(version: str, given: Any) -> dict[str, Component]:
    if not isinstance(given, dict):
        raise _bad(f"{version} must be an object of components")
    unknown = sorted(set(given) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise _bad(f"{version} has unknown components: {', '.join(unknown)}")
    missing = [name for name in REQUIRED if name not in given]
    if missing:
        raise _bad(f"{version} lacks components: {', '.join(missing)}")
    return {name: _component(f"{version}.{name}", spec) for name, spec in given.items()}


def _component(where: str, spec: Any) -> Component:
    if not isinstance(spec, dict) or set(spec) - {"image", "command"}:
        raise _bad(f"{where} must be an object of image and command")
    image, command = spec.get("image"), spec.get("command")
    if not isinstance(image, str) or len(image) > MAX_IMAGE or not _IMAGE.fullmatch(image):
        raise _bad(f"{where}.image must be an image reference")
    if (
        not isinstance(command, list)
        or not 1 <= len(command) <= MAX_ARGS
        or not all(isinstance(arg, str) and 0 < len(arg) <= MAX_ARG for arg in command)
    ):
        raise _bad(f"{where}.command must be a list of 1 to {MAX_ARGS} non-empty strings")
    return Component(image, tuple(command))


def _node(version: str, given: Any) -> dict[str, NodeAsset]:
    where = f"{version}.{NODE}"
    if not isinstance(given, dict):
        raise _bad(f"{where} must be an object of downloads")
    unknown = sorted(set(given) - set(NODE_REQUIRED) - set(NODE_OPTIONAL))
    if unknown:
        raise _bad(f"{where} has unknown downloads: {', '.join(unknown)}")
    missing = [name for name in NODE_REQUIRED if name not in given]
    if missing:
        raise _bad(f"{where} lacks downloads: {', '.join(missing)}")
    assets = {}
    for name, spec in given.items():
        if not isinstance(spec, dict) or set(spec) != {"url", "sha256"}:
            raise _bad(f"{where}.{name} must be an object of url and sha256")
        url, sha256 = spec["url"], spec["sha256"]
        if not isinstance(url, str) or len(url) > MAX_URL or not _ASSET_URL.fullmatch(url):
            raise _bad(f"{where}.{name}.url must be https://… or /assets/<file>")
        if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
            raise _bad(f"{where}.{name}.sha256 must be 64 lowercase hex digits")
        assets[name] = NodeAsset(url, sha256)
    return assets


def _bad(message: str) -> Invalid:
    return Invalid(f"setting kubernetes-version-catalog {message}", "value")


def document(releases: Mapping[str, Mapping[str, tuple[str, tuple[str, ...]]]]) -> str:
    """The JSON text of a catalog, from version -> component -> (image, command)."""
    return json.dumps(
        {
            version: {
                name: {"image": image, "command": list(command)}
                for name, (image, command) in components.items()
            }
            for version, components in releases.items()
        },
        sort_keys=True,
    )


def binaries(
    image_of: Mapping[str, str], kwok_command: tuple[str, ...] | None = None
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The components of one version whose images keep each binary in /usr/local/bin, as the
    upstream images and corral's local control-plane image both do."""
    components: dict[str, tuple[str, tuple[str, ...]]] = {
        name: (image_of[name], (f"/usr/local/bin/{name}",))
        for name in (*REQUIRED, ETCD_S3)
        if name in REQUIRED or name in image_of
    }
    if kwok_command is not None:
        components[KWOK] = (image_of[KWOK], kwok_command)
    return components


DEFAULT = document(
    {
        UPSTREAM_VERSION: binaries(
            {
                ETCD: UPSTREAM_ETCD,
                ETCDCTL: UPSTREAM_ETCD,
                ETCDUTL: UPSTREAM_ETCD,
                **{
                    name: f"registry.k8s.io/{name}:{UPSTREAM_VERSION}"
                    for name in (APISERVER, CONTROLLER_MANAGER, SCHEDULER)
                },
            }
        )
    }
)
