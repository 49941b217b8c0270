"""`make bench`: run every benchmark and print its figures."""

from __future__ import annotations

import sys

from tests.bench import (
    auth,
    console,
    devenv,
    idle,
    machines,
    many,
    pages,
    podmemory,
    pools,
    projects,
    provisioning,
    ratelimit,
    readiness,
    scale,
    tunnel,
    workloads,
)

BENCHMARKS = {
    "devenv": devenv.main,
    "auth": auth.main,
    "ratelimit": ratelimit.main,
    "scale": scale.main,
    "projects": projects.main,
    "readiness": readiness.main,
    "workloads": workloads.main,
    "many": many.main,
    "pages": pages.main,
    "podmemory": podmemory.main,
    "idle": idle.main,
    "pools": pools.main,
    "provisioning": provisioning.main,
    "machines": machines.main,
    "console": console.main,
    "tunnel": tunnel.main,
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    for name in names:
        print(f"== {name}", flush=True)
        BENCHMARKS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
