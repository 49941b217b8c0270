"""Clusters: while a Cluster exists, its runtime (`cluster_runtime.ClusterRuntime`: agent,
project keeper, provisioner) runs on the replica holding its shard (`shard_manager`); a
deleted cluster is forgotten, by the leader: the machines of its node pools, its hosted
control plane, its namespace (with the Node CRs, pools and registration tokens) and the
tokens' values, its credential, corral's service account in the cluster or, for a cluster
registered by its manifest, everything the manifest made there (the agent goes with it), and
last the agent's credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Namespace, Secret
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding
from lightkube.types import PatchType

from corral.core.api import drivers, names
from corral.core.clusters.importing import AGENT_NAME, AGENT_NAMESPACE
from corral.core.errors import Unavailable
from corral.core.kube import registration_tokens
from corral.core.kube.client import delete_if_present
from corral.core.kube.status import StatusWriter
from corral.core.tunnel import manifest
from corral.operator.controlplane.pods import PodRuntime
from corral.operator.downstream import pools
from corral.operator.drivers.registry import Drivers
from corral.operator.state import State

log = logging.getLogger(__name__)

# Removing corral from a cluster is best effort: an unreachable cluster must not block its
# deletion for longer than this.
REMOVE_TIMEOUT = 10.0
# What corral leaves in a cluster, each a namespace and the binding of its ServiceAccount to
# cluster-admin: an import's account, then what the manifest made (where the agent runs); a
# cluster switched from the one to the other has both.
LEFT_IN_CLUSTER = ((AGENT_NAMESPACE, AGENT_NAME), (manifest.NAMESPACE, manifest.NAME))
# How often a deletion looks again whether a hosted control plane is gone.
REMOVE_POLL = 2.0


@kopf.on.delete(names.GROUP, names.VERSION, names.CLUSTER.plural)
async def forget_cluster(name: str, spec: kopf.Spec, memo: kopf.Memo, **_: Any) -> None:
    """Deleting a cluster removes everything corral keeps for it. A hosted control plane goes
    after the machines (which its apiserver still serves) and with its data; corral's agent in
    it goes with it."""
    state: State = memo.state
    await remove_machines(state, memo.machine_drivers, name)
    if spec.get("driver") in drivers.HOSTED:
        if not await PodRuntime(state.kube, memo.hosted_grant).remove(name):
            raise kopf.TemporaryError(
                "waiting for the control plane's pods and volumes to go", delay=REMOVE_POLL
            )
    elif name != names.LOCAL_CLUSTER:
        await remove_agent(state, name)
    await state.connections.forget(name)
    await delete_if_present(state.kube, Namespace, name)
    await registration_tokens.remove_cluster(state.kube, name)
    # The agent's credential last: a tunnel stays up until it goes (and the removal above goes
    # through it), then the API server holding it closes it and a dial with it is refused.
    for secret in (names.credential_secret_name(name), names.agent_credential_secret_name(name)):
        with contextlib.suppress(ApiError):
            await state.kube.delete(Secret, secret, namespace=names.SYSTEM_NAMESPACE)


async def remove_machines(state: State, drivers: Drivers, cluster: str) -> None:
    """The machines of the cluster's node pools, and then the pools' hold on the namespace.
    Drivers reach their machines without the cluster; the cluster's own part (kwok machines,
    join credentials) is best effort, as for the agent."""
    client: AsyncClient | None = None
    try:
        async with asyncio.timeout(REMOVE_TIMEOUT):
            client = await state.connections.client(cluster)
    except Exception as exc:  # noqa: BLE001 - an unreachable cluster is still deleted
        log.warning("cluster %s unreachable while its machines are removed: %s", cluster, exc)
    writer = StatusWriter(state.kube, pools.FIELD_MANAGER, state.clock)
    await pools.PoolSync(cluster, state, writer, drivers).remove_all(client)


async def remove_agent(state: State, cluster: str) -> None:
    """Best effort: an unreachable cluster must not block its deletion."""
    try:
        async with asyncio.timeout(REMOVE_TIMEOUT):
            client = await state.connections.client(cluster)
            await _remove(client)
    except Unavailable:
        return  # no credential: corral never got in
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("could not remove corral from the cluster %s: %s", cluster, exc)


async def _remove(client: AsyncClient) -> None:
    """Every namespace of `LEFT_IN_CLUSTER` with its binding: each binding is first handed to
    the garbage collector as its namespace's dependent, since it is what allows the deleting
    and corral's credential is a token of an account in one of those namespaces: once that
    account is gone, nothing more can be asked. The namespaces are deleted last, corral's own
    (the manifest's, for a registered cluster) after the other."""
    present = []
    for namespace, binding in LEFT_IN_CLUSTER:
        try:
            found = await client.get(Namespace, namespace)
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            await delete_if_present(client, ClusterRoleBinding, binding)
            continue
        assert found.metadata is not None
        owner = {"apiVersion": "v1", "kind": "Namespace", "name": namespace,
                 "uid": found.metadata.uid}  # fmt: skip
        try:
            await client.patch(ClusterRoleBinding, binding,
                               {"metadata": {"ownerReferences": [owner]}},
                               patch_type=PatchType.MERGE)  # fmt: skip
        except ApiError as exc:
            if exc.status.code != 404:  # a binding already gone is fine
                raise
        present.append(namespace)
    for namespace in present:
        await delete_if_present(client, Namespace, namespace)
