"""Entry point: `corral-apiserver` (or `python -m corral.apiserver`)."""

from __future__ import annotations

import logging
import os
import ssl
import sys

from aiohttp import web

from corral.apiserver.app import create_app
from corral.apiserver.config import ApiServerConfig, ConfigError
from corral.core import kube
from corral.core.features import FeatureError
from corral.core.features import parse as parse_features
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
    web.run_app(
        create_app(
            kube.async_client(), features, config.ca_file.read_bytes() if config.ca_file else None
        ),
        host=config.host,
        port=config.port,
        ssl_context=context,
        access_log=None,
        print=None,
    )
    return 0
