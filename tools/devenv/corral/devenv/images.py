"""Container images made on this host, with no registry.

A real node needs a sandbox ("pause") image before it can run any pod, and tests need an image
with a shell. One busybox image serves both: built from the static busybox binary with umoci
in a fraction of a second, imported into each node's containerd.

Hosted control planes run from a second image: the same busybox plus the static devkube
binary, linked under the name of every component it serves. It takes seconds to build, so it
is cached by the devkube binary's hash and shared by every environment of this user.
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
    with _locked(cache / ".lock"):
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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
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
