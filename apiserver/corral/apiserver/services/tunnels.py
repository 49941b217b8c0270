"""An agent dialling in (`GET /v3/connect`; docs/design/cluster-agent.md, section 3): its
credential checked against its cluster's digest alone, its parameters checked, and the
credential corral reaches the cluster with stored as for any cluster, marked to go through
the tunnel. The credential is the only thing that authenticates an agent: it is no Token, so
`/v3` does not know it, and it opens only its own cluster's tunnel.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from corral.apiserver.deps import Deps
from corral.apiserver.services import registering
from corral.core import errors
from corral.core.api import drivers, names
from corral.core.clusters.credential import Credential
from corral.core.kube import agent_credentials, cluster_secrets
from corral.core.kube.client import FIELD_MANAGER, as_dict
from corral.core.tunnel import handshake, manifest, settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Agent:
    """What an agent said of itself when it dialled."""

    cluster: str
    params: handshake.Params
    version: str
    image: str


def authenticated(deps: Deps, authorization: str) -> str | None:
    """The cluster whose agent presents this credential; None for any other (unknown cluster,
    another cluster's value, a value replaced since, a cluster being deleted)."""
    presented = handshake.presented(authorization)
    if presented is None:
        return None
    cluster, value = presented
    stored = stored_digest(deps, cluster)
    if not stored or not handshake.matches(value, stored):
        log.info("cluster %s: an agent credential was refused", cluster)
        return None
    known = deps.stores.clusters.get(cluster)
    if known is None or known["metadata"].get("deletionTimestamp"):
        log.info("cluster %s: an agent dialled for a cluster being deleted", cluster)
        return None
    return cluster


def stored_digest(deps: Deps, cluster: str) -> str:
    """The digest of the cluster's agent credential; empty when it has none."""
    secret = deps.stores.agent_credentials.get(
        f"{names.SYSTEM_NAMESPACE}/{names.agent_credential_secret_name(cluster)}"
    )
    return agent_credentials.digest_of(secret)


def still_authorised(deps: Deps, cluster: str, digest: str) -> bool:
    """Whether a tunnel opened with the credential of `digest` may stay: the credential is
    still the cluster's. A cluster being deleted keeps its tunnel (its clean-up goes through
    it) until the operator revokes the credential, last."""
    return stored_digest(deps, cluster) == digest and deps.stores.clusters.get(cluster) is not None


def agent(cluster: str, headers: Mapping[str, str]) -> Agent:
    """The agent's headers, checked (`Invalid` naming the header at fault)."""
    return Agent(
        cluster=cluster,
        params=handshake.params(headers.get(handshake.HEADER_PARAMS, "")),
        version=handshake.text(handshake.HEADER_VERSION, headers.get(handshake.HEADER_VERSION, "")),
        image=handshake.text(handshake.HEADER_IMAGE, headers.get(handshake.HEADER_IMAGE, "")),
    )


async def store_credential(deps: Deps, agent: Agent) -> None:
    """The cluster's credential becomes the agent's ServiceAccount through the tunnel; written
    only when it differs from what is stored, so a reconnecting agent writes nothing."""
    credential = Credential(
        server=agent.params.server,
        ca_cert=agent.params.ca_cert,
        token=agent.params.token,
        tunnel=True,
    )
    if deps.connections.credential(agent.cluster) == credential:
        return
    cluster = deps.stores.clusters.get(agent.cluster)
    if cluster is None:
        return
    secret = cluster_secrets.credential_secret(cluster, credential)
    stored = await deps.kube.apply(secret, field_manager=FIELD_MANAGER, force=True)
    deps.connections.credentials.put(as_dict(stored))
    log.info("cluster %s: corral's credential now goes through its agent", agent.cluster)


async def import_manifest(deps: Deps, name: str) -> str:
    """The manifest of `GET /v3/import/<token>_<cluster>.yaml`: the registration token is its
    only credential, and it must be a live token of that cluster, an imported one; anything
    else is the same `NotFound`."""
    parsed = manifest.parse_name(name)
    token = registering.presented(deps, parsed[0]) if parsed else None
    if parsed is None or token is None or token["metadata"]["namespace"] != parsed[1]:
        raise errors.not_found("no such manifest")
    cluster = deps.stores.clusters.get(parsed[1])
    if (
        cluster is None
        or cluster["metadata"].get("deletionTimestamp")
        or cluster["spec"].get("driver") != drivers.IMPORTED
    ):
        raise errors.not_found("no such manifest")
    value = await agent_credentials.ensure(deps.kube, cluster)
    checksum = hashlib.sha256(deps.corral_ca).hexdigest() if deps.corral_ca else ""
    spec = cluster["spec"]
    agent = manifest.Agent(cluster=parsed[1], corral_url=deps.external_url, credential=value,
                           image=deps.agent_image, ca_checksum=checksum,
                           env=spec.get(settings.AGENT_ENV) or [],
                           customization=spec.get(settings.CUSTOMIZATION) or {})  # fmt: skip
    log.info("cluster %s: its import manifest was served", parsed[1])
    return manifest.render(agent)
