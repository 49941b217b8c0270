"""Importing a cluster, synchronously, so that a bad kubeconfig or an unreachable server is
answered at once and nothing is stored.

The kubeconfig is parsed, used once to create corral's own service account in the cluster,
and dropped; the Cluster and the Secret holding corral's credential are written only after
that credential has been shown to work, under a claim on the cluster's identity (`claims`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.deps import Deps
from corral.apiserver.services import claims
from corral.core.api import ids, names
from corral.core.clusters import importing
from corral.core.kube import agent, cluster_secrets, kinds
from corral.core.kube.claims import ANNOTATION_IDENTITY
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj


async def import_cluster(
    deps: Deps, encoded: Any, spec: dict[str, Any], labels: dict[str, str]
) -> Obj:
    """The Cluster of the base64 kubeconfig `encoded`, whatever the body gave as that;
    422 for whatever the kubeconfig or its server gets wrong, 409 for a cluster corral has
    already."""
    kube = deps.kube
    # Up to 256 KiB of YAML: parsed off the event loop.
    user = await asyncio.to_thread(importing.parse_kubeconfig, encoded)
    identity = await agent.identify(user)
    name = ids.generate("c")
    async with claims.claimed(kube, identity, name):
        imported = await agent.install_agent(user)
        annotations = {ANNOTATION_IDENTITY: identity}
        meta = ObjectMeta(
            name=name,
            labels=labels,
            annotations=annotations,
            finalizers=[names.FINALIZER_OPERATOR],
        )
        cluster = kinds.Cluster(metadata=meta, spec={**spec, "importedConfig": {}})
        created = as_dict(await kube.create(cluster))
        await _store_credential(deps, created, imported)
    await claims.owned(kube, identity, created)
    return created


async def import_into(deps: Deps, encoded: Any, cluster: Obj) -> Obj:
    """Imports the cluster of the base64 kubeconfig `encoded` into a Cluster made without
    one (waiting, Pending, for an import), as `import_cluster` does; nothing is stored when
    the kubeconfig or its server fails, and the Cluster stays as it was."""
    kube = deps.kube
    user = await asyncio.to_thread(importing.parse_kubeconfig, encoded)
    identity = await agent.identify(user)
    name = cluster["metadata"]["name"]
    async with claims.claimed(kube, identity, name):
        imported = await agent.install_agent(user)
        annotations = {"metadata": {"annotations": {ANNOTATION_IDENTITY: identity}}}
        marked = as_dict(
            await kube.patch(kinds.Cluster, name, annotations, patch_type=PatchType.MERGE)
        )
        await _store_credential(deps, marked, imported, keep_cluster=True)
    await claims.owned(kube, identity, marked)
    return marked


async def _store_credential(
    deps: Deps, cluster: Obj, imported: agent.Imported, keep_cluster: bool = False
) -> None:
    secret = cluster_secrets.credential_secret(cluster, imported.credential)
    try:
        stored = await deps.kube.create(secret)
    except Exception:
        # Never leave a cluster behind that has no way in (one that waited for its import
        # goes on waiting).
        if not keep_cluster:
            await delete_if_present(deps.kube, kinds.Cluster, cluster["metadata"]["name"])
        raise
    deps.connections.credentials.put(as_dict(stored))
