"""The Kubernetes versions corral can provision, and the images each runs (docs/provisioning.md).

The catalog is the setting `kubernetes-version-catalog`: a JSON object from a version
(`v1.36.3`) to its components, each an image and the command that starts it in that image:

    {"v1.36.3": {"kube-apiserver": {"image": "registry.k8s.io/kube-apiserver:v1.36.3",
                                    "command": ["/usr/local/bin/kube-apiserver"]}, ...}}

A version needs every component of REQUIRED; `kwok` is optional and, when present, keeps the
simulated nodes of the kwok node driver alive from inside the control plane. Flags are never
in the catalog: corral adds them, so one plan serves the upstream images and the local ones.

A version may also have a `node` section: the files a real machine downloads to join a cluster
of that version (kubelet, kube-proxy, the CNI plugins and an image archive), each a URL and its
sha256. `flannel` and `network-policies` are the pod network's components on those machines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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
REQUIRED = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER, ETCDCTL, ETCDUTL)
OPTIONAL = (KWOK, ETCD_S3)
# The pod network of real machines: flanneld and the NetworkPolicy enforcer, run as DaemonSets
# on the machines rather than in the control plane (core/provisioning/network.py); optional too.
FLANNEL = "flannel"
NETWORK_POLICIES = "network-policies"
POD_NETWORK = (FLANNEL, NETWORK_POLICIES)

# The node section: what a machine downloads and checks before it joins.
NODE = "node"
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
CNI_PLUGINS = "cni-plugins"  # a gzip'd tar of bridge, host-local, portmap and loopback
IMAGES = "images"  # an archive `ctr images import` takes, for machines that reach no registry
NODE_REQUIRED = (KUBELET, KUBE_PROXY, CNI_PLUGINS)
NODE_OPTIONAL = (IMAGES,)
# A url is absolute https, or a file corral serves itself, resolved against corral's own URL.
ASSETS_PATH = "/assets/"
ASSET_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", re.ASCII)
MAX_URL = 1024
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
# Printable ASCII without space: what a URL may hold unescaped, and nothing a shell line or an
# HTTP request line could be split on.
_URL_CHARS = re.compile(r"[!-~]+", re.ASCII)

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

# corral's default: the upstream images of the version it is built with (untestable here:
# this machine reaches no registry; docs/provisioning.md says so).
UPSTREAM_VERSION = "v1.36.3"
UPSTREAM_ETCD = "registry.k8s.io/etcd:3.6.8-0"


@dataclass(frozen=True)
class Component:
    image: str
    command: tuple[str, ...]


@dataclass(frozen=True)
class Asset:
    url: str  # https://… or /assets/<file>
    sha256: str  # 64 lowercase hex digits


@dataclass(frozen=True)
class Release:
    version: str
    components: Mapping[str, Component]
    # What a real machine downloads, by name (NODE_REQUIRED, and NODE_OPTIONAL when given);
    # None: the version provisions control planes only, with simulated workers.
    node: Mapping[str, Asset] | None = None

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
        if not isinstance(components, dict):
            raise _bad(f"{version} must be an object of components")
        given = dict(components)
        node = _node(f"{version}.{NODE}", given.pop(NODE)) if NODE in given else None
        releases[version] = Release(version, _components(version, given), node)
    return Catalog(releases)


def _components(version: str, given: dict[str, Any]) -> dict[str, Component]:
    unknown = sorted(set(given) - set(REQUIRED) - set(OPTIONAL) - set(POD_NETWORK))
    if unknown:
        raise _bad(f"{version} has unknown components: {', '.join(unknown)}")
    missing = [name for name in REQUIRED if name not in given]
    if missing:
        raise _bad(f"{version} lacks components: {', '.join(missing)}")
    return {name: _component(f"{version}.{name}", spec) for name, spec in given.items()}


def _node(where: str, given: Any) -> dict[str, Asset]:
    if not isinstance(given, dict):
        raise _bad(f"{where} must be an object of files")
    unknown = sorted(set(given) - set(NODE_REQUIRED) - set(NODE_OPTIONAL))
    if unknown:
        raise _bad(f"{where} has unknown files: {', '.join(unknown)}")
    missing = [name for name in NODE_REQUIRED if name not in given]
    if missing:
        raise _bad(f"{where} lacks files: {', '.join(missing)}")
    return {name: _asset(f"{where}.{name}", spec) for name, spec in given.items()}


def _asset(where: str, spec: Any) -> Asset:
    if not isinstance(spec, dict) or set(spec) != {"url", "sha256"}:
        raise _bad(f"{where} must be an object of url and sha256")
    url, sha256 = spec["url"], spec["sha256"]
    if not isinstance(url, str) or not _is_asset_url(url):
        raise _bad(
            f"{where}.url must be an https:// URL or {ASSETS_PATH}<file> (letters, digits, "
            f"'.', '_', '+', '-'), at most {MAX_URL} characters, with no user or password"
        )
    if not isinstance(sha256, str) or _SHA256.fullmatch(sha256) is None:
        raise _bad(f"{where}.sha256 must be 64 lowercase hexadecimal digits")
    return Asset(url, sha256)


def _is_asset_url(url: str) -> bool:
    if len(url) > MAX_URL or _URL_CHARS.fullmatch(url) is None:
        return False
    if url.startswith(ASSETS_PATH):
        return ASSET_FILE.fullmatch(url.removeprefix(ASSETS_PATH)) is not None
    try:
        parts = urlsplit(url)
        hostname, _ = parts.hostname, parts.port  # a port out of range raises
    except ValueError:
        return False
    # Credentials in a URL would show in /v3/settings to everyone who may read the catalog.
    return parts.scheme == "https" and bool(hostname) and "@" not in parts.netloc


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


def _bad(message: str) -> Invalid:
    return Invalid(f"setting kubernetes-version-catalog {message}", "value")


def document(
    releases: Mapping[str, Mapping[str, tuple[str, tuple[str, ...]]]],
    nodes: Mapping[str, Mapping[str, Asset]] | None = None,
) -> str:
    """The JSON text of a catalog, from version -> component -> (image, command), and the
    node sections of those versions that have one, version -> file name -> Asset."""
    versions: dict[str, dict[str, object]] = {
        version: {
            name: {"image": image, "command": list(command)}
            for name, (image, command) in components.items()
        }
        for version, components in releases.items()
    }
    for version, assets in (nodes or {}).items():
        versions[version][NODE] = {
            name: {"url": asset.url, "sha256": asset.sha256} for name, asset in assets.items()
        }
    return json.dumps(versions, sort_keys=True)


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
