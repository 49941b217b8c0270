"""Entry point: `corral-agent` (or `python -m corral.agent`)."""

from __future__ import annotations

import asyncio
import logging
import sys
from importlib import metadata

from corral.agent import dialer
from corral.agent.config import AgentConfig, ConfigError
from corral.core.kube.credential import from_environment
from corral.core.logs import quiet_http_clients


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    quiet_http_clients()
    try:
        config = AgentConfig.from_env()
        upstream = dialer.Upstream.of(from_environment())
    except (ConfigError, ValueError, RuntimeError) as exc:
        print(f"corral-agent: {exc}", file=sys.stderr)
        return 2
    asyncio.run(run(config, upstream))
    return 0


async def run(config: AgentConfig, upstream: dialer.Upstream) -> None:
    trust = await dialer.corral_ssl(config.url, config.ca_checksum, config.insecure)
    dial = dialer.Dial(url=config.url, authorization=config.authorization(),
                       version=metadata.version("corral"), image=config.image,
                       ssl=trust)  # fmt: skip
    logging.getLogger(__name__).info(
        "cluster %s: agent %s dialling %s", config.cluster, dial.version, config.url
    )
    await dialer.run(dial, upstream)
