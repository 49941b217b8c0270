"""Cluster registration tokens (`/v3/clusterregistrationtokens`; docs/design/real-machines.md,
"Registration"): what a machine joins a provisioned cluster with.

A token lets whoever holds it add machines to the cluster, so only those who may manage the
cluster's nodes see tokens at all: its owners and administrators. Anyone else is answered as
if there were none (404), members of the cluster included. As Rancher does, the value is
shown to them on every read, inside the node command they copy: it is theirs to hand to
machines, and rotating or deleting the token is how it is taken back.
"""

from __future__ import annotations

import datetime
from typing import Any

from lightkube import ApiError

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import either
from corral.apiserver.services.visibility import seen_cluster, settle_cluster
from corral.core import errors
from corral.core.api import drivers, ids, names
from corral.core.api.ids import ScopedId
from corral.core.kube import registration_tokens
from corral.core.kube.informer import Obj
from corral.core.projects import roles
from corral.core.registration import command, tokens
from corral.core.tunnel import manifest

TYPE = "clusterRegistrationToken"


def may_manage(who: Caller, cluster: str) -> bool:
    return who.access.cluster_role(cluster) == roles.CLUSTER_OWNER


def listed(deps: Deps, who: Caller, cluster: str | None) -> list[Obj]:
    cache = deps.stores.registration_tokens
    found = cache.by_index("cluster", cluster) if cluster else cache.all()
    return [t for t in found if may_manage(who, t["metadata"]["namespace"])]


def find(deps: Deps, who: Caller, scoped_id: str) -> Obj | None:
    sid = ScopedId.parse_or_none(scoped_id)
    found = deps.stores.registration_tokens.get(sid.key) if sid else None
    return found if sid and found and may_manage(who, sid.namespace) else None


def value(deps: Deps, token: Obj) -> str:
    """The token's value; empty while its Secret is not in the cache yet."""
    key = f"{names.SYSTEM_NAMESPACE}/{token['spec'].get('secretName', '')}"
    return registration_tokens.value_of(deps.stores.registration_values.get(key))


def node_command(deps: Deps, token: str, pinned: bool = True) -> str:
    if not token:
        return ""
    return command.node_command(
        deps.external_url, token, deps.corral_ca, deps.serving_cert, pinned=pinned
    )


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Obj:
    if body.get("type", TYPE) != TYPE:
        raise errors.invalid("type", f"type must be {TYPE}")
    cluster_id = either(body, ("clusterId", "clusterName"), ids.MAX_LABEL)
    await settle_cluster(deps, who, cluster_id)
    cluster = seen_cluster(deps, who, cluster_id)
    if cluster is None or not may_manage(who, cluster_id):
        raise errors.invalid("clusterId", f"cluster {cluster_id} not found", "InvalidReference")
    if cluster["spec"].get("driver") not in drivers.HOSTED | {drivers.IMPORTED}:
        raise errors.invalid(
            "clusterId",
            "tokens register machines with rke2 and k3s clusters, agents with imported ones",
            "InvalidReference",
        )
    if cluster["metadata"].get("deletionTimestamp"):
        raise errors.Conflict(f"cluster {cluster_id} is being deleted", code="Conflict")
    ttl = tokens.ttl(body.get("ttl"))
    now = datetime.datetime.now(datetime.UTC)
    created, secret = await registration_tokens.create(
        deps.kube, cluster_id, ids.generate("crt"), now, ttl
    )
    _remember(deps, created, secret)
    return created


async def rotate(deps: Deps, token: Obj) -> Obj:
    """A new value; the old one stops working at once. 409 when the token changed since it
    was read (another rotation won)."""
    try:
        rotated, secret = await registration_tokens.rotate(deps.kube, token)
    except ApiError as exc:
        if exc.status.code == 409:
            raise errors.Conflict(
                "the token changed while it was rotated; read it again", code="Conflict"
            ) from None
        raise
    old = token["spec"].get("secretName", "")
    deps.stores.registration_values.forget(f"{names.SYSTEM_NAMESPACE}/{old}")
    _remember(deps, rotated, secret)
    return rotated


async def delete(deps: Deps, token: Obj) -> None:
    """Revokes the token: it stops working with this answer."""
    meta = token["metadata"]
    await registration_tokens.delete(deps.kube, token)
    deps.stores.registration_tokens.forget(f"{meta['namespace']}/{meta['name']}")
    secret = token["spec"].get("secretName", "")
    deps.stores.registration_values.forget(f"{names.SYSTEM_NAMESPACE}/{secret}")


def _remember(deps: Deps, token: Obj, secret: Obj) -> None:
    deps.stores.registration_values.put(secret)
    deps.stores.registration_tokens.put(token)


def manifest_url(deps: Deps, token: Obj, value: str) -> str:
    """Where an imported cluster's agent manifest is served with this token; empty for a
    provisioned cluster's token (it imports nothing) or while the value is not cached."""
    cluster_id = token["metadata"]["namespace"]
    cluster = deps.stores.clusters.get(cluster_id)
    if not value or cluster is None or cluster["spec"].get("driver") != drivers.IMPORTED:
        return ""
    return manifest.url(deps.external_url, value, cluster_id)
