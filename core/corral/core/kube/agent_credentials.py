"""A cluster agent's credential in the management cluster: only its sha256, in a Secret of
svc-system owned by the Cluster and labelled with it, so the API server finds it by cluster
and the value itself exists only in the manifest the agent runs from
(docs/design/cluster-agent.md, section 3). Issuing again replaces it: the old value stops
opening the tunnel."""

from __future__ import annotations

import base64

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.kube.client import FIELD_MANAGER, as_dict
from corral.core.kube.informer import Obj
from corral.core.tunnel import handshake

DIGEST_KEY = "sha256"


async def issue(kube: AsyncClient, cluster: Obj) -> tuple[str, Obj]:
    """A new credential for the cluster's agent: the value (a secret, for the manifest only)
    and the Secret holding its digest."""
    value = handshake.new_value()
    meta = cluster["metadata"]
    secret = Secret(
        metadata=ObjectMeta(
            name=names.agent_credential_secret_name(meta["name"]),
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_AGENT_CREDENTIAL: meta["name"]},
            ownerReferences=[
                OwnerReference(
                    apiVersion=names.API_VERSION,
                    kind=names.CLUSTER.kind,
                    name=meta["name"],
                    uid=meta["uid"],
                )
            ],
        ),
        type="Opaque",
        data={DIGEST_KEY: base64.b64encode(handshake.digest(value).encode()).decode()},
    )
    stored = await kube.apply(secret, field_manager=FIELD_MANAGER, force=True)
    return value, as_dict(stored)


def digest_of(secret: Obj | None) -> str:
    """The digest a credential Secret holds; empty when there is none."""
    encoded = ((secret or {}).get("data") or {}).get(DIGEST_KEY, "")
    return base64.b64decode(encoded).decode() if encoded else ""
