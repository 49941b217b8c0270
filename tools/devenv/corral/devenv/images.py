"""Container images made on this host, with no registry.

A real node needs a sandbox ("pause") image before it can run any pod, and tests need an image
with a shell. One busybox image serves both: built from the static busybox binary with umoci
in a fraction of a second, imported into each node's containerd.

Hosted control planes run from a second image: the same busybox plus the static devkube
binary, linked under the name of every component it serves. It takes seconds to build, so it
is cached by the devkube binary's hash and shared by every environment of this user.

The pod network of real machines runs from two more, each busybox plus one binary of
tools/netbins and the netfilter tools it runs: flanneld (iptables) and kube-router, the
NetworkPolicy enforcer (iptables and ipset). nodeassets.py builds and caches them with the rest
of the files machines download.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from corral.devenv.host import run

log = logging.getLogger(__name__)

BUSYBOX_IMAGE = "localhost/busybox:1"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

CONTROLPLANE_REPOSITORY = "localhost/corral-controlplane"
# devkube runs whichever command its argv[0] names.
CONTROLPLANE_COMMANDS = (
    "etcd",
    "etcdctl",
    "etcdutl",
    "etcd-s3",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)
# The slim devkube of the previous Kubernetes minor (tools/devkube/v1.35) holds only these; its
# image serves a second catalog version, whose etcd and kwok come from the main image.
PREVIOUS_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KWOK_COMMAND = "/usr/local/bin/corral-kwok"
# kwok needs the stages corral's simulated nodes go through, which devkube prints; the
# operator's manifests only append kwok's flags.
KWOK_SCRIPT = """#!/bin/sh
set -e
stages=/tmp/corral-kwok-stages.yaml
devkube kwok-stages > "$stages"
exec kwok --config="$stages" "$@"
"""
FLANNEL_REPOSITORY = "localhost/corral-flannel"
FLANNEL_COMMAND = "/opt/bin/flanneld"
NETWORK_POLICIES_REPOSITORY = "localhost/corral-kube-router"
NETWORK_POLICIES_COMMAND = "/usr/local/bin/kube-router"
# flanneld runs iptables to set up its rules and to clear its nftables ones at start-up, and
# kube-router's policy controller runs iptables-save, iptables-restore and ipset; each exits
# without them (tools/netbins/README.md). Their images carry Debian's nf_tables iptables, which
# kube-proxy's iptables on the machines is too (all three share the filter table), with the
# libraries and extensions it loads; one multi-call binary, dispatching on its name.
IPTABLES = Path("/usr/sbin/xtables-nft-multi")
IPTABLES_NAMES = ("iptables", "ip6tables", "iptables-restore", "ip6tables-restore",
                  "iptables-save", "ip6tables-save")  # fmt: skip
# Debian's ipset (package `ipset`, `make node-deps`), for kube-router's sets of pod addresses.
IPSET = Path("/usr/sbin/ipset")
# Every devkube change leaves an archive of about 60 MB behind: keep the newest few of each
# Kubernetes version.
CACHE_KEEP = 3


class ControlPlaneImage(NamedTuple):
    reference: str  # localhost/corral-controlplane:<kubernetes version>-<devkube hash>
    archive: Path

    @property
    def repository(self) -> str:
        return self.reference.rsplit(":", 1)[0]

    @property
    def version(self) -> str:
        """The Kubernetes version of its components, as a catalog key (v1.36.3)."""
        return self.reference.rsplit(":", 1)[1].rsplit("-", 1)[0]


def build_busybox(workdir: Path) -> Path:
    """An OCI archive of `localhost/busybox:1` whose command is `sleep infinity`."""
    archive = workdir / "busybox.tar"
    _build(
        workdir / "busybox",
        "1",
        _busybox_root,
        ["--config.cmd", "/bin/sleep", "--config.cmd", "infinity"],
        archive,
    )
    return archive


def build_flannel(workdir: Path, flanneld: Path, tag: str) -> Path:
    """An OCI archive of `<FLANNEL_REPOSITORY>:<tag>`: busybox (for the init container that
    writes the CNI configuration), flanneld at FLANNEL_COMMAND and iptables."""
    archive = workdir / "flannel.tar"
    _build(workdir / "flannel", tag, lambda rootfs: _flannel_root(rootfs, flanneld),
           ["--config.cmd", FLANNEL_COMMAND], archive)  # fmt: skip
    return archive


def build_network_policies(workdir: Path, kube_router: Path, tag: str) -> Path:
    """An OCI archive of `<NETWORK_POLICIES_REPOSITORY>:<tag>`: busybox, kube-router at
    NETWORK_POLICIES_COMMAND, iptables and ipset."""
    archive = workdir / "network-policies.tar"
    _build(workdir / "network-policies", tag,
           lambda rootfs: _kube_router_root(rootfs, kube_router),
           ["--config.cmd", NETWORK_POLICIES_COMMAND], archive)  # fmt: skip
    return archive


def controlplane_tag(devkube: Path) -> str:
    """`<kubernetes version>-<first 12 hex digits of the binary's sha256>`."""
    printed = run([str(devkube), "kube-apiserver", "--version"]).split()
    if len(printed) != 2 or printed[0] != "Kubernetes":
        raise RuntimeError(f"{devkube} kube-apiserver --version printed {' '.join(printed)!r}")
    digest = hashlib.sha256()
    with devkube.open("rb") as binary:
        for chunk in iter(lambda: binary.read(1 << 20), b""):
            digest.update(chunk)
    return f"{printed[1]}-{digest.hexdigest()[:12]}"


def controlplane_cache() -> Path:
    configured = os.environ.get("CORRAL_CONTROLPLANE_IMAGE_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "corral" / "controlplane-image"


def build_controlplane(
    devkube: Path, commands: Sequence[str] = CONTROLPLANE_COMMANDS
) -> ControlPlaneImage:
    """The control-plane image of `devkube`, linked under `commands`: from the cache, or
    built into it."""
    tag = controlplane_tag(devkube)
    cache = controlplane_cache()
    image = ControlPlaneImage(
        f"{CONTROLPLANE_REPOSITORY}:{tag}", cache / f"corral-controlplane-{tag}.oci.tar"
    )
    if image.archive.exists():
        return image
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cache / ".lock"):
        # A concurrent run may have built it while this one waited for the lock.
        if image.archive.exists():
            return image
        # Holding the lock, a work folder left behind is from a killed run.
        for stale in cache.glob("work.*"):
            shutil.rmtree(stale, ignore_errors=True)
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="work.", dir=cache) as work:
            partial = Path(work) / "image.tar"
            _build(
                Path(work) / "layout",
                tag,
                lambda rootfs: _controlplane_root(rootfs, devkube, commands),
                [],
                partial,
            )
            partial.rename(image.archive)
        log.info(
            "built %s in %.1fs (%.0f MB)",
            image.reference,
            time.monotonic() - began,
            image.archive.stat().st_size / 1e6,
        )
        _prune(cache, image.version)
    return image


# -- building ---------------------------------------------------------------------------------


def _build(
    layout: Path,
    tag: str,
    fill: Callable[[Path], None],
    config: Sequence[str],
    archive: Path,
) -> None:
    """An OCI archive at `archive` of one image, `tag`, whose single layer `fill` writes."""
    bundle = layout.with_name(f"{layout.name}-bundle")
    for stale in (layout, bundle):
        shutil.rmtree(stale, ignore_errors=True)
    image = f"{layout}:{tag}"
    run(["umoci", "init", "--layout", str(layout)])
    run(["umoci", "new", "--image", image])
    run(["umoci", "unpack", "--image", image, str(bundle)])
    fill(bundle / "rootfs")
    run(["umoci", "repack", "--image", image, str(bundle)])
    run(["umoci", "config", "--image", image, "--config.env", PATH_ENV, *config])
    run(["umoci", "gc", "--layout", str(layout)])
    run(["tar", "-C", str(layout), "-cf", str(archive), "."])
    shutil.rmtree(bundle)
    shutil.rmtree(layout)


def _busybox_root(rootfs: Path) -> None:
    for directory in ("bin", "tmp", "etc", "proc", "sys", "dev"):
        (rootfs / directory).mkdir(exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy2(busybox, rootfs / "bin" / "busybox")
    for applet in run([busybox, "--list"]).split():
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:\n")


def _controlplane_root(rootfs: Path, devkube: Path, commands: Sequence[str]) -> None:
    _busybox_root(rootfs)
    (rootfs / "var" / "lib" / "etcd").mkdir(parents=True)
    bin_dir = rootfs / "usr" / "local" / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copyfile(devkube, bin_dir / "devkube")
    (bin_dir / "devkube").chmod(0o755)
    for command in commands:
        (bin_dir / command).symlink_to("devkube")
    if "kwok" in commands:
        script = rootfs / KWOK_COMMAND.lstrip("/")
        script.write_text(KWOK_SCRIPT)
        script.chmod(0o755)
    (rootfs / "tmp").chmod(0o777 | stat.S_ISVTX)


def _with_binary(rootfs: Path, binary: Path, command: str) -> None:
    _busybox_root(rootfs)
    target = rootfs / command.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(binary, target)
    target.chmod(0o755)
    (rootfs / "tmp").chmod(0o777 | stat.S_ISVTX)


def _flannel_root(rootfs: Path, flanneld: Path) -> None:
    _with_binary(rootfs, flanneld, FLANNEL_COMMAND)
    _with_netfilter_tools(rootfs, ())


def _kube_router_root(rootfs: Path, kube_router: Path) -> None:
    _with_binary(rootfs, kube_router, NETWORK_POLICIES_COMMAND)
    _with_netfilter_tools(rootfs, (IPSET,))


def _with_netfilter_tools(rootfs: Path, others: Sequence[Path]) -> None:
    """This host's iptables under IPTABLES_NAMES, and `others` at their own paths, with the
    libraries and extensions they load."""
    # Debian's layout (merged /usr), so the paths compiled into the loader and iptables hold.
    for directory in ("lib", "lib64"):
        (rootfs / "usr" / directory).mkdir(parents=True, exist_ok=True)
        (rootfs / directory).symlink_to(f"usr/{directory}")
    extensions = _xtables_dir()
    shared = [*sorted(extensions.glob("*.so")), IPTABLES, *others]
    for path in sorted({*shared, *(lib for file in shared for lib in _libraries(file))}):
        target = rootfs / path.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path.resolve(), target)
    for name in IPTABLES_NAMES:
        (rootfs / "usr" / "sbin" / name).symlink_to(IPTABLES.name)
    # /run/xtables.lock is where iptables serialises with other writers; the DaemonSet mounts
    # the host's /run over this.
    (rootfs / "run").mkdir(exist_ok=True)


def _xtables_dir() -> Path:
    """Where iptables loads its extensions from: beside its libxtables."""
    for library in _libraries(IPTABLES):
        if library.name.startswith("libxtables.so"):
            return library.resolve().parent / "xtables"
    raise RuntimeError(f"{IPTABLES} does not link libxtables; is Debian's iptables installed?")


def _libraries(binary: Path) -> list[Path]:
    """The shared libraries `binary` loads, its dynamic loader among them, as ldd names them."""
    found = []
    for line in run(["ldd", str(binary)]).splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            path = words[words.index("=>") + 1]
        elif words and words[0].startswith("/"):
            path = words[0]
        else:
            continue  # linux-vdso: the kernel's
        if not path.startswith("/"):
            raise RuntimeError(f"{binary} needs a library ldd cannot find: {line.strip()}")
        found.append(Path(path))
    return found


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Held by one process of this user at a time: cached builds are made once."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _prune(cache: Path, version: str) -> None:
    """The newest few archives of each Kubernetes version stay: the two versions' images are
    rebuilt at different times."""
    archives = sorted(
        cache.glob(f"corral-controlplane-{version}-*.oci.tar"),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in archives[CACHE_KEEP:]:
        old.unlink(missing_ok=True)
