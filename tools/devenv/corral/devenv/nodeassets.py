"""The files a machine downloads to join a provisioned cluster of the local catalog, and the pod
network's images (the catalog's `node` section: docs/provisioning.md, "The version catalog").

They are one folder, which the API server serves at `/assets/<file>` (CORRAL_NODE_ASSET_DIR):

- `kubelet-<version>` and `kube-proxy-<version>`: devkube-node (tools/devkube/node: devkube's
  kubelet and kube-proxy alone, 87 MB where devkube is 162), one file under both names (hard
  links). It runs the command its name says, so a machine installs it as `kubelet` and
  `kube-proxy`.
- `cni-plugins-<version>.tgz`: tools/netbins' bridge, host-local, portmap and loopback, at the
  top level of the tarball.
- `images-<version>.tar`: one OCI archive of busybox (the pods' sandbox and the workload image),
  flannel and kube-router (the NetworkPolicy enforcer), each named in its index, so that
  `ctr -n k8s.io images import` names all three.
- `SHA256SUMS`: the sha256 of each, in sha256sum's format, computed once.

It takes seconds to build and is cached like the control-plane image: under
~/.cache/corral/node-assets/<hash of every input>/, shared by every environment of this user.
Each environment serves hard links to it from a folder of its own (`served_from`).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from corral.core.provisioning import catalog
from corral.devenv import images
from corral.devenv.host import run

log = logging.getLogger(__name__)

SUMS = "SHA256SUMS"
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
# How containerd's importer names an image of an OCI index without `--base-name`.
CONTAINERD_IMAGE_NAME = "io.containerd.image.name"
OCI_REF_NAME = "org.opencontainers.image.ref.name"
FLANNEL_MODULE = "github.com/flannel-io/flannel"
NETWORK_POLICIES_MODULE = "github.com/cloudnativelabs/kube-router/v2"
CNI_MODULE = "github.com/containernetworking/plugins"
# tools/devkube/build.sh builds it beside devkube.
NODE_BINARY = "devkube-node"
# Each devkube or netbins change leaves a folder of about 130 MB behind: keep the newest few.
CACHE_KEEP = 3


@dataclass(frozen=True)
class NodeAssets:
    directory: Path
    version: str  # the Kubernetes version of the kubelet, a catalog key (v1.36.3)
    files: Mapping[str, str]  # catalog name (kubelet, kube-proxy, cni-plugins, images) -> file
    sha256: Mapping[str, str]  # file -> its sha256
    flannel_image: str
    network_policies_image: str

    def node(self) -> dict[str, catalog.Asset]:
        """The catalog's `node` section for `version`: each file served by corral itself."""
        return {
            name: catalog.Asset(f"{catalog.ASSETS_PATH}{file}", self.sha256[file])
            for name, file in self.files.items()
        }

    def components(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The pod network's catalog components, as catalog.document() takes them."""
        return {
            catalog.FLANNEL: (self.flannel_image, (images.FLANNEL_COMMAND,)),
            catalog.NETWORK_POLICIES: (
                self.network_policies_image,
                (images.NETWORK_POLICIES_COMMAND,),
            ),
        }


def cache_dir() -> Path:
    configured = os.environ.get("CORRAL_NODE_ASSET_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "corral" / "node-assets"


def build(node_binary: Path, netbins: Path) -> NodeAssets:
    """The node files of `node_binary`'s Kubernetes version (devkube-node) with the pod network
    of `netbins` (the tools/netbins folder, built): from the cache, or built into it."""
    versions = module_versions(netbins / "go.mod")
    binaries = netbins / "bin"
    version = kubelet_version(node_binary)
    flanneld, policies = binaries / "flanneld", binaries / "kube-router"
    flannel_image = f"{images.FLANNEL_REPOSITORY}:{versions[FLANNEL_MODULE]}-{_short(flanneld)}"
    policies_image = (
        f"{images.NETWORK_POLICIES_REPOSITORY}:{versions[NETWORK_POLICIES_MODULE]}-"
        f"{_short(policies)}"
    )
    files = {
        catalog.KUBELET: f"kubelet-{version}",
        catalog.KUBE_PROXY: f"kube-proxy-{version}",
        catalog.CNI_PLUGINS: f"cni-plugins-{versions[CNI_MODULE]}.tgz",
        catalog.IMAGES: f"images-{version}.tar",
    }
    # Everything that goes into the folder: the binaries (named by their own hashes: the
    # netbins folder is named after its inputs), what the images copy from this host, and
    # how this module and images.py put them together.
    key = _digest(
        [
            _file_digest(node_binary).encode(),
            binaries.resolve().name.encode(),
            *(_file_digest(path).encode() for path in _host_inputs()),
            Path(__file__).read_bytes(),
            Path(images.__file__).read_bytes(),
        ]
    )[:16]
    cache = cache_dir()
    directory = cache / key
    assets = NodeAssets(directory, version, files, {}, flannel_image, policies_image)
    if not (directory / SUMS).exists():
        cache.mkdir(parents=True, exist_ok=True)
        with images.locked(cache / ".lock"):
            # A concurrent run may have built it while this one waited for the lock.
            if not (directory / SUMS).exists():
                _build(assets, node_binary, binaries, cache)
                _prune(cache)
    return NodeAssets(directory, version, files, _read_sums(directory / SUMS), flannel_image,
                      policies_image)  # fmt: skip


def served_from(assets: NodeAssets, directory: Path) -> NodeAssets:
    """`assets` as files of `directory`, hard links to the cache's (copies where the cache is
    on another file system). An environment serves its own folder: a newer build pruning the
    cache leaves it whole, and replacing a file there (a test serving other bytes) touches no
    other environment's. A file is only ever replaced there, never written into: the cache
    holds the same inode."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for name in [*assets.files.values(), SUMS]:
        try:
            os.link(assets.directory / name, directory / name)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            shutil.copy2(assets.directory / name, directory / name)
    return dataclasses.replace(assets, directory=directory)


def kubelet_version(node_binary: Path) -> str:
    """The Kubernetes version of the kubelet in `node_binary`, as a catalog key (v1.36.3)."""
    printed = run([str(node_binary), "kubelet", "--version"]).split()
    if len(printed) != 2 or printed[0] != "Kubernetes":
        raise RuntimeError(f"{node_binary} kubelet --version printed {' '.join(printed)!r}")
    return printed[1]


def module_versions(go_mod: Path) -> dict[str, str]:
    """The versions tools/netbins/go.mod pins, by module path."""
    pinned = re.findall(r"^\s+(\S+) (v\S+)$", go_mod.read_text(), re.MULTILINE)
    return dict(pinned)


# -- building ---------------------------------------------------------------------------------


def _build(assets: NodeAssets, node_binary: Path, binaries: Path, cache: Path) -> None:
    # Holding the lock, a work folder left behind is from a killed run.
    for stale in cache.glob("work.*"):
        shutil.rmtree(stale, ignore_errors=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="work.", dir=cache) as work:
        out = Path(work) / "assets"
        out.mkdir()
        files = assets.files
        shutil.copyfile(node_binary, out / files[catalog.KUBELET])
        (out / files[catalog.KUBELET]).chmod(0o755)
        os.link(out / files[catalog.KUBELET], out / files[catalog.KUBE_PROXY])
        _cni_tarball(binaries / "cni", out / files[catalog.CNI_PLUGINS])
        built = Path(work) / "images"
        built.mkdir()
        flannel_tag = assets.flannel_image.rsplit(":", 1)[1]
        policies_tag = assets.network_policies_image.rsplit(":", 1)[1]
        archives = [
            (images.BUSYBOX_IMAGE, images.build_busybox(built)),
            (assets.flannel_image,
             images.build_flannel(built, binaries / "flanneld", flannel_tag)),
            (assets.network_policies_image,
             images.build_network_policies(built, binaries / "kube-router", policies_tag)),
        ]  # fmt: skip
        _bundle(archives, out / files[catalog.IMAGES], Path(work) / "bundle")
        sums = "".join(f"{_file_digest(out / name)}  {name}\n" for name in sorted(files.values()))
        (out / SUMS).write_text(sums)
        out.rename(assets.directory)
    log.info("built the node files %s in %.1fs", assets.directory, time.monotonic() - began)


def _cni_tarball(plugins: Path, target: Path) -> None:
    with tarfile.open(target, "w:gz") as tar:
        for name in CNI_PLUGINS:
            info = tar.gettarinfo(plugins / name, arcname=name)
            info.mode, info.uid, info.gid, info.uname, info.gname = 0o755, 0, 0, "root", "root"
            with (plugins / name).open("rb") as binary:
                tar.addfile(info, binary)


def _bundle(archives: Sequence[tuple[str, Path]], target: Path, layout: Path) -> None:
    """One OCI archive of the images in `archives` (reference, single-image OCI archive)."""
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    manifests = []
    for reference, archive in archives:
        with tarfile.open(archive) as tar:
            index = tar.extractfile("./index.json")
            assert index is not None
            (manifest,) = json.load(index)["manifests"]
            for member in tar.getmembers():
                if member.isfile() and member.name.startswith("./blobs/sha256/"):
                    tar.extract(member, layout, filter="data")
        manifest["annotations"] = {
            CONTAINERD_IMAGE_NAME: reference,
            OCI_REF_NAME: reference.rsplit(":", 1)[1],
        }
        manifests.append(manifest)
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": manifests}))
    run(["tar", "-C", str(layout), "-cf", str(target), "."])


# -- hashes -----------------------------------------------------------------------------------


def _host_inputs() -> list[Path]:
    """What the images copy from this host besides the built binaries."""
    busybox = Path(shutil.which("busybox") or "/bin/busybox")
    return [busybox, images.IPTABLES, images.IPSET]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _short(path: Path) -> str:
    return _file_digest(path)[:12]


def _digest(parts: Sequence[bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def _read_sums(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return {name: sha for sha, name in (line.split("  ", 1) for line in lines)}


def _prune(cache: Path) -> None:
    """The newest few folders stay: two worktrees may use different builds."""
    folders = sorted(
        (p for p in cache.iterdir() if p.is_dir() and not p.name.startswith("work.")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in folders[CACHE_KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
