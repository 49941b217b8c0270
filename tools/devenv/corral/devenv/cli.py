"""`python -m corral.devenv run`: the local stack in the foreground until Ctrl-C (`make run`)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from corral.core.logs import quiet_http_clients
from corral.devenv.environment import Environment, Options
from corral.devenv.host import HostNotReady, check_host
from corral.devenv.process import ProcessFailed
from corral.devenv.waiting import Timeout


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m corral.devenv", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="start everything and stay in the foreground")
    run.add_argument(
        "--dir",
        type=Path,
        default=Path(".corral"),
        help="state folder: kubeconfigs, PKI, logs, dev.env (default: .corral)",
    )
    run.add_argument(
        "--devkube",
        type=Path,
        default=Path("tools/devkube/bin/devkube"),
        help="the devkube binary (make devkube builds it)",
    )
    run.add_argument(
        "--previous-devkube",
        type=Path,
        default=Path("tools/devkube/bin/devkube-v1.35"),
        help="the slim Kubernetes 1.35 control plane (make devkube builds it); with "
        "--hosted-control-planes, clusters may be created at 1.35 and upgraded to 1.36",
    )
    run.add_argument(
        "--netbins",
        type=Path,
        default=Path("tools/netbins"),
        help="the pod network's binaries (make netbins builds them); with "
        "--hosted-control-planes, the catalog gets the files real machines download",
    )
    run.add_argument("--crds", type=Path, default=Path("crds"), help="CRD folder to apply")
    run.add_argument(
        "--downstream-clusters",
        type=int,
        default=1,
        help="simulated downstream clusters (default: 1)",
    )
    run.add_argument(
        "--nodes", type=int, default=3, help="fake kwok nodes per downstream cluster (default: 3)"
    )
    run.add_argument(
        "--real-nodes",
        type=int,
        default=None,
        help="real nodes (kubelet + containerd) for the management cluster (default: 1 as root "
        "on Linux with the node packages, `make node-deps`; else 0, and the reason is printed)",
    )
    run.add_argument(
        "--hosted-control-planes",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let provisioned (rke2/k3s) clusters run their control planes as pods on the real "
        "nodes: builds the control-plane image and sets the catalog and storage class settings "
        "(default: on with real nodes)",
    )
    run.add_argument(
        "--real-clusters",
        type=int,
        default=None,
        help="k3s clusters corral provisions at start, each with one real worker of the local "
        "cloud (default: 1 with hosted control planes and `make netbins` built, else 0)",
    )
    run.add_argument(
        "--operators",
        type=int,
        default=1,
        help="operator replicas, sharing the downstream clusters (default: 1)",
    )
    run.add_argument(
        "--api-port",
        type=int,
        default=8443,
        help="port of the /v3 API, 0 for any free port (default: 8443)",
    )
    run.add_argument(
        "--no-corral",
        action="store_true",
        help="start only the clusters, not corral's operator and API server",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    quiet_http_clients()
    if not args.devkube.exists():
        print(f"corral.devenv: {args.devkube} is missing; run `make devkube`", file=sys.stderr)
        return 2
    real_nodes = args.real_nodes if args.real_nodes is not None else _real_nodes_possible()
    hosted = args.hosted_control_planes
    hosted = real_nodes > 0 if hosted is None else hosted
    netbins = args.netbins.resolve() if (args.netbins / "bin").exists() else None
    real_clusters = args.real_clusters
    if real_clusters is None:
        real_clusters = 1 if hosted and netbins is not None and not args.no_corral else 0
    try:
        options = Options(
            root=args.dir,
            devkube=args.devkube.resolve(),
            crds=args.crds,
            downstream_clusters=args.downstream_clusters,
            nodes_per_cluster=args.nodes,
            api_port=args.api_port,
            start_corral=not args.no_corral,
            real_nodes=real_nodes,
            hosted_control_planes=hosted,
            previous_devkube=(
                args.previous_devkube.resolve() if args.previous_devkube.exists() else None
            ),
            netbins=netbins,
            real_clusters=real_clusters,
            operators=args.operators,
        )
    except ValueError as exc:
        print(f"corral.devenv: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with Environment(options) as env:
            print(f"corral is up in {env.startup_seconds:.1f}s; settings in {env.env_file}:")
            print(masked(env.env_file.read_text()), end="")
            if env.local_cloud_checksum:
                print(f"The local cloud's node driver (docs/operations.md): "
                      f"url file://{env.local_cloud_driver}, "
                      f"checksum {env.local_cloud_checksum}")  # fmt: skip
            print("Ctrl-C stops every process.", flush=True)
            while True:
                time.sleep(1.0)
                for process in env.processes():
                    process.check()
    except KeyboardInterrupt:
        print("\nstopped", file=sys.stderr)
        return 0
    except (ProcessFailed, HostNotReady, Timeout) as exc:
        print(f"corral.devenv: {exc}", file=sys.stderr)
        return 1


def _real_nodes_possible() -> int:
    """1 when this host can run a real node; else 0, saying why, so that a newcomer who is not
    root still gets the simulated clusters."""
    try:
        check_host()
    except HostNotReady as exc:
        print(f"corral.devenv: simulated clusters only: {exc}", file=sys.stderr)
        return 0
    return 1


SECRET_KEYS = ("CORRAL_TOKEN", "CORRAL_ADMIN_PASSWORD")


def masked(env_text: str) -> str:
    """dev.env with its secrets left out: they are in the file, not on the terminal."""
    lines = []
    for line in env_text.splitlines():
        key, _, value = line.partition("=")
        if key in SECRET_KEYS:
            value = (
                f"{value.split(':')[0]}:… (see the file)" if ":" in value else "… (see the file)"
            )
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # The first signal starts an orderly stop; a second one must not cut that stop short
    # and orphan the processes it had not reached yet.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
