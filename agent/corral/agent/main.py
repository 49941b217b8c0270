"""Entry point: `corral-agent` (or `python -m corral.agent`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
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
    """Dials until SIGTERM or SIGINT. In its pod the agent is PID 1, to which the kernel
    delivers only the signals it handles: without handlers, a deleted pod's agent would keep
    its tunnel, and take it back from the Deployment's next pod, until the kubelet kills it a
    grace period later."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    trust = await dialer.corral_ssl(config.url, config.ca_checksum, config.insecure)
    dial = dialer.Dial(url=config.url, authorization=config.authorization(),
                       version=metadata.version("corral"), image=config.image,
                       ssl=trust)  # fmt: skip
    log = logging.getLogger(__name__)
    log.info("cluster %s: agent %s dialling %s", config.cluster, dial.version, config.url)
    dialling = asyncio.create_task(dialer.run(dial, upstream))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({dialling, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    dialling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await dialling
    log.info("cluster %s: agent stopped", config.cluster)
