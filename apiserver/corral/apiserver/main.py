"""Entry point: `corral-apiserver` (or `python -m corral.apiserver`)."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import sys

from corral.apiserver.app import create_app
from corral.apiserver.config import ApiServerConfig, ConfigError
from corral.apiserver.http import serving
from corral.core.features import FeatureError
from corral.core.features import parse as parse_features
from corral.core.kube import client as kube
from corral.core.logs import quiet_http_clients


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    quiet_http_clients()
    try:
        config = ApiServerConfig.from_env()
        features = parse_features(os.environ.get("CORRAL_FEATURES", ""))
    except (ConfigError, FeatureError) as exc:
        print(f"corral-apiserver: {exc}", file=sys.stderr)
        return 2
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(config.tls_cert, config.tls_key)
    asyncio.run(run(config, features, context))
    return 0


async def run(config: ApiServerConfig, features: dict[str, bool], context: ssl.SSLContext) -> None:
    corral_ca = config.ca_file.read_bytes() if config.ca_file else None
    app = create_app(
        kube.async_client(), features, config.external_url, corral_ca, config.driver_files,
        config.node_assets, serving_cert=config.tls_cert.read_bytes(),
        tunnel_listen=config.tunnel_listen, tunnel_advertise=config.tunnel_advertise,
        agent_image=config.agent_image,
    )  # fmt: skip
    await serving.serve(app, config.host, config.port, context)
