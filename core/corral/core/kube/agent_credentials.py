"""A cluster agent's credential in the management cluster: a Secret of svc-system owned by the
Cluster and labelled with it, holding the value as the registration tokens' Secrets hold
theirs (the API server reads no Secret elsewhere), so a manifest fetched again carries the same
credential and never cuts off the agent already running (docs/design/cluster-agent.md,
section 3). Issuing anew replaces it: the old value stops opening the tunnel."""

from __future__ import annotations

import base64
import hashlib

from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.kube import cluster_secrets
from corral.core.kube.client import FIELD_MANAGER, as_dict
from corral.core.kube.informer import Obj
from corral.core.tunnel import handshake

VALUE_KEY = "value"


async def issue(kube: AsyncClient, cluster: Obj) -> tuple[str, Obj]:
    """A new credential for the cluster's agent: the value (a secret) and its Secret."""
    value = handshake.new_value()
    name = cluster["metadata"]["name"]
    secret = cluster_secrets.owned_secret(
        cluster, names.agent_credential_secret_name(name), names.LABEL_AGENT_CREDENTIAL,
        {VALUE_KEY: base64.b64encode(value.encode()).decode()},
    )  # fmt: skip
    stored = await kube.apply(secret, field_manager=FIELD_MANAGER, force=True)
    return value, as_dict(stored)


async def ensure(kube: AsyncClient, cluster: Obj) -> str:
    """The cluster's agent credential, made the first time."""
    try:
        secret = as_dict(await kube.get(
            Secret, names.agent_credential_secret_name(cluster["metadata"]["name"]),
            namespace=names.SYSTEM_NAMESPACE,
        ))  # fmt: skip
    except ApiError as exc:
        if exc.status.code != 404:
            raise
    else:
        if value := value_of(secret):
            return value
    value, _ = await issue(kube, cluster)
    return value


def value_of(secret: Obj | None) -> str:
    encoded = ((secret or {}).get("data") or {}).get(VALUE_KEY, "")
    return base64.b64decode(encoded).decode() if encoded else ""


def digest_of(secret: Obj | None) -> str:
    """The sha256 of the credential a Secret holds; empty when there is none."""
    value = value_of(secret)
    return hashlib.sha256(value.encode()).hexdigest() if value else ""
