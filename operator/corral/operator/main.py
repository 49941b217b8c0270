"""Entry point: `corral-operator` (or `python -m corral.operator`)."""

from __future__ import annotations

import logging

import kopf

from corral.core.logs import quiet_http_clients, quiet_ssh_client

# Importing a handler module registers its handlers with kopf.
from corral.operator import probes, startup  # noqa: F401
from corral.operator.config import OperatorConfig
from corral.operator.management import (  # noqa: F401
    clusters,
    etcdbackups,
    groupsync,
    nodedrivers,
    projects,
    sshmachines,
    tokens,
    users,
)


def main() -> int:
    config = OperatorConfig.from_env()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    quiet_http_clients()
    quiet_ssh_client()
    kopf.run(
        clusterwide=True,
        liveness_endpoint=config.liveness_endpoint,
        peering_name=config.peering_name,
        priority=config.priority,
        memo=kopf.Memo(config=config),
    )
    return 0
