"""Entry point: `corral-apiserver [--workers N]` (or `python -m corral.apiserver`)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import ssl
import sys
import tempfile
from pathlib import Path

from corral.apiserver import eventloop, workers
from corral.apiserver.app import create_app
from corral.apiserver.config import ApiServerConfig, ConfigError
from corral.apiserver.deps import DEPS
from corral.apiserver.http import serving
from corral.core.features import FeatureError
from corral.core.features import parse as parse_features
from corral.core.kube import client as kube
from corral.core.logs import quiet_http_clients

# More workers than this on one listening socket is a mistake, not a configuration.
MAX_WORKERS = 256


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="corral-apiserver")
    parser.add_argument(
        "--workers", type=int, default=0, metavar="N",
        help="processes serving the one port (default, or 0: the CPUs this process may use)",
    )  # fmt: skip
    parsed = parser.parse_args(argv)
    if not 0 <= parsed.workers <= MAX_WORKERS:
        parser.error(f"--workers must be from 0 to {MAX_WORKERS}")
    return parsed


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    quiet_http_clients()
    count = arguments(sys.argv[1:] if argv is None else argv).workers or workers.available_cpus()
    try:
        config = ApiServerConfig.from_env()
        features = parse_features(os.environ.get("CORRAL_FEATURES", ""))
    except (ConfigError, FeatureError) as exc:
        print(f"corral-apiserver: {exc}", file=sys.stderr)
        return 2
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(config.tls_cert, config.tls_key)
    sock = serving.listen(config.host, config.port)
    if count == 1:
        eventloop.run(run(config, features, context, sock))
        return 0
    shared = Path(tempfile.mkdtemp(prefix="corral-apiserver-"))

    def worker(supervisor: int) -> int:
        eventloop.run(run(config, features, context, sock, shared / "throttle.db", supervisor))
        return 0

    logging.getLogger(__name__).info("serving with %d workers", count)
    try:
        return workers.supervise(count, worker)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


async def run(
    config: ApiServerConfig,
    features: dict[str, bool],
    context: ssl.SSLContext,
    sock: socket.socket,
    throttle: Path | None = None,
    supervisor: int | None = None,
) -> None:
    corral_ca = config.ca_file.read_bytes() if config.ca_file else None
    app = create_app(
        kube.async_client(), features, config.external_url, corral_ca, config.driver_files,
        config.node_assets, serving_cert=config.tls_cert.read_bytes(), throttle=throttle,
        tunnel_listen=config.tunnel_listen, tunnel_advertise=config.tunnel_advertise,
        agent_image=config.agent_image, tls=context,
    )  # fmt: skip
    # Alone, the server listens at once and /readyz says when it is ready; a worker shares
    # the port with ready ones, so it accepts only once ready itself (serving.serve).
    ready = app[DEPS].readiness.wait if supervisor is not None else None
    await serving.serve(app, sock, context, supervisor, ready)
