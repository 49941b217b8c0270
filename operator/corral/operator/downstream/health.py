"""A cluster's health: one look at its API server (`/readyz`, and `/version` when asked), and
the Cluster's status written from what was seen with the agent's informers.

The status is the field manager `corral-cluster-health`'s: the seven cluster conditions, the
driver, `observedGeneration`, and what a look at a reachable cluster gives (endpoint, capacity,
version, …). While the cluster cannot be looked at, those keep the values last seen.
"""

from __future__ import annotations

import aiohttp

from corral.core.clusters import observe
from corral.core.clusters.credential import Credential
from corral.core.kube import kinds
from corral.core.kube.connections import Connection
from corral.core.kube.informer import Informer, Obj
from corral.core.kube.status import StatusWriter

FIELD_MANAGER = "corral-cluster-health"
PROBE_TIMEOUT = 5.0
# What a look at a reachable cluster gives (`observe.cluster_status`), kept while it cannot be
# looked at.
LOOKED_AT = ("provider", "apiEndpoint", "caCert", "nodeCount", "capacity", "allocatable",
             "requested", "limits", "version")  # fmt: skip


async def probe(connection: Connection, with_version: bool = True) -> observe.Probe:
    """`/readyz`, and `/version` first when asked: a version changes only with a restart, so
    the agent asks for it on a full look and when the server comes back, not on every probe."""
    credential = connection.credential
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT)
    session = connection.session()
    version = None
    try:
        if with_version:
            async with session.get("version", timeout=timeout) as response:
                if response.status in (401, 403):
                    return _refused(response.status)
                version = await response.json()
        async with session.get("readyz", timeout=timeout) as response:
            if response.status in (401, 403):
                return _refused(response.status)
            text = (await response.text()).strip()
            ready = response.status == 200
            version = version if isinstance(version, dict) else None
            return observe.Probe(True, ready, "" if ready else text[-500:], False, version)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        message = f"cannot reach {credential.server}: {exc or type(exc).__name__}"
        return observe.Probe(False, False, message)


def _refused(status: int) -> observe.Probe:
    return observe.Probe(
        True,
        False,
        f"HTTP {status} from the cluster: corral's credential was refused",
        credential_rejected=True,
    )


class Health:
    def __init__(self, cluster: str, clusters: Informer, writer: StatusWriter) -> None:
        self.cluster = cluster
        self.clusters = clusters
        self.writer = writer

    async def write_status(
        self,
        body: Obj,
        credential: Credential | None,
        probe: observe.Probe | None,
        nodes: list[Obj],
        totals: dict[str, observe.PodTotals],
        failures: dict[str, str],
        duplicate_of: str | None = None,
        agent: observe.Agent | None = None,
    ) -> None:
        driver = body["spec"]["driver"]
        current = body.get("status") or {}
        generation = body["metadata"].get("generation")
        fields = {"driver": driver, **{k: current[k] for k in LOOKED_AT if k in current}}
        if credential is not None and probe is not None and probe.reachable:
            fields |= observe.cluster_status(
                driver, credential.server, credential.ca_cert, nodes, totals, probe
            )
        if agent is not None and agent.connected and agent.image:
            fields["agentImage"] = agent.image
        fields["observedGeneration"] = generation
        observed = observe.cluster_conditions(
            driver,
            credential is not None or agent is not None,
            probe,
            nodes,
            failures,
            duplicate_of,
            current.get("provisioning"),
            agent,
        )
        written = await self.writer.apply(
            kinds.Cluster, self.cluster, seen=body, conditions=observed, fields=fields
        )
        if written is not None:
            self.clusters.put(written)
