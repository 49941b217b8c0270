"""Container images made on this host, with no registry.

A real node needs a sandbox ("pause") image before it can run any pod, and tests need an image
with a shell. One busybox image serves both: built from the static busybox binary with umoci
in a fraction of a second, imported into each node's containerd.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from corral.devenv.host import run

BUSYBOX_IMAGE = "localhost/busybox:1"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build_busybox(workdir: Path) -> Path:
    """An OCI archive of `localhost/busybox:1` whose command is `sleep infinity`."""
    layout, bundle = workdir / "busybox", workdir / "busybox-bundle"
    archive = workdir / "busybox.tar"
    for stale in (layout, bundle):
        shutil.rmtree(stale, ignore_errors=True)
    tag = f"{layout}:1"
    run(["umoci", "init", "--layout", str(layout)])
    run(["umoci", "new", "--image", tag])
    run(["umoci", "unpack", "--image", tag, str(bundle)])
    rootfs = bundle / "rootfs"
    for directory in ("bin", "tmp", "etc", "proc", "sys", "dev"):
        (rootfs / directory).mkdir(exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    shutil.copy2(busybox, rootfs / "bin" / "busybox")
    for applet in run([busybox, "--list"]).split():
        if applet != "busybox":
            (rootfs / "bin" / applet).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:\n")
    run(["umoci", "repack", "--image", tag, str(bundle)])
    run(
        [
            "umoci",
            "config",
            "--image",
            tag,
            "--config.env",
            PATH_ENV,
            "--config.cmd",
            "/bin/sleep",
            "--config.cmd",
            "infinity",
        ]
    )
    run(["umoci", "gc", "--layout", str(layout)])
    run(["tar", "-C", str(layout), "-cf", str(archive), "."])
    shutil.rmtree(bundle)
    shutil.rmtree(layout)
    return archive
