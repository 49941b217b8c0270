"""Where each cluster's agent tunnel is held (docs/design/cluster-agent.md, sections 6-7): a
Lease per cluster in svc-system, taken by the API server replica the agent dialled, renewed
every `RENEW_SECONDS` while the tunnel lasts and dropped when it ends. Any corral process
reads it to reach the tunnel through the holder's relay (`tunnel_proxy`), and the operator
to say whether the agent is connected: a Lease not renewed for `LEASE_SECONDS` is a lost agent.

Every process authorises itself to another's relay with one key, kept in a Secret of
svc-system and made by the first process that needs it.
"""

from __future__ import annotations

import base64
import datetime
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightkube import ApiError, AsyncClient, operators
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.core.api import names
from corral.core.kube.client import FIELD_MANAGER, as_dict, delete_if_present
from corral.core.kube.informer import Informer, Obj
from corral.core.times import format_micro_time

LEASE_SECONDS = 15
RENEW_SECONDS = 5.0
KEY = "key"


@dataclass(frozen=True)
class Holding:
    """A cluster's tunnel as its Lease says: who holds it, where it is reached, the agent."""

    holder: str
    relay: str  # host:port of the holder's relay
    version: str
    image: str
    renewed: datetime.datetime

    def fresh(self, now: datetime.datetime) -> bool:
        return now - self.renewed < datetime.timedelta(seconds=LEASE_SECONDS)


def holding(lease: Obj | None) -> Holding | None:
    """What a Lease says; None for none, or one without a holder or a renewal."""
    if lease is None:
        return None
    spec = lease.get("spec") or {}
    annotations = lease["metadata"].get("annotations") or {}
    renewed = spec.get("renewTime")
    if not spec.get("holderIdentity") or not renewed:
        return None
    return Holding(
        holder=spec["holderIdentity"],
        relay=annotations.get(names.ANNOTATION_TUNNEL_RELAY, ""),
        version=annotations.get(names.ANNOTATION_AGENT_VERSION, ""),
        image=annotations.get(names.ANNOTATION_AGENT_IMAGE, ""),
        renewed=_parse(renewed),
    )


async def take(
    kube: AsyncClient, cluster: str, holder: str, relay: str, version: str, image: str,
    now: datetime.datetime,
) -> None:  # fmt: skip
    """This process holds the cluster's tunnel now, whoever held it before."""
    lease = Lease(
        metadata=ObjectMeta(
            name=names.tunnel_lease_name(cluster),
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_TUNNEL: cluster},
            annotations={
                names.ANNOTATION_TUNNEL_RELAY: relay,
                names.ANNOTATION_AGENT_VERSION: version,
                names.ANNOTATION_AGENT_IMAGE: image,
            },
        ),
        spec=LeaseSpec(
            holderIdentity=holder,
            leaseDurationSeconds=LEASE_SECONDS,
            acquireTime=now,
            renewTime=now,
        ),
    )
    await kube.apply(lease, field_manager=FIELD_MANAGER, force=True)


async def renew(kube: AsyncClient, cluster: str, holder: str, now: datetime.datetime) -> bool:
    """Renews the Lease while `holder` holds it; False once another took it (or it is gone),
    and nothing is written then."""
    name = names.tunnel_lease_name(cluster)
    try:
        lease = as_dict(await kube.get(Lease, name, namespace=names.SYSTEM_NAMESPACE))
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    if (lease.get("spec") or {}).get("holderIdentity") != holder:
        return False
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
        "spec": {"renewTime": format_micro_time(now)},
    }
    try:
        await kube.patch(Lease, name, patch, namespace=names.SYSTEM_NAMESPACE,
                         patch_type=PatchType.MERGE)  # fmt: skip
    except ApiError as exc:
        if exc.status.code == 409:  # taken meanwhile
            return False
        raise
    return True


async def drop(kube: AsyncClient, cluster: str, holder: str) -> None:
    """Removes the Lease if `holder` still holds it: a newer holder's stays."""
    name = names.tunnel_lease_name(cluster)
    try:
        lease = as_dict(await kube.get(Lease, name, namespace=names.SYSTEM_NAMESPACE))
    except ApiError as exc:
        if exc.status.code == 404:
            return
        raise
    if (lease.get("spec") or {}).get("holderIdentity") == holder:
        await delete_if_present(kube, Lease, name, names.SYSTEM_NAMESPACE)


async def relay_key(kube: AsyncClient) -> str:
    """The key corral's processes present to each other's tunnel proxies."""
    for _ in range(2):
        try:
            secret = await kube.get(Secret, names.TUNNEL_RELAY_SECRET,
                                    namespace=names.SYSTEM_NAMESPACE)  # fmt: skip
            data = secret.data or {}
            return base64.b64decode(data[KEY]).decode()
        except ApiError as exc:
            if exc.status.code != 404:
                raise
        value = base64.b64encode(secrets.token_urlsafe(32).encode()).decode()
        metadata = ObjectMeta(name=names.TUNNEL_RELAY_SECRET, namespace=names.SYSTEM_NAMESPACE)
        try:
            await kube.create(Secret(metadata=metadata, type="Opaque", data={KEY: value}))
        except ApiError as exc:
            if exc.status.code != 409:  # another process made it first: read theirs
                raise
    raise RuntimeError("the tunnel relay key could not be read")


class Relays:
    """The Leases of every tunnel, watched, and the relay key."""

    def __init__(self, kube: AsyncClient, on_change: Callable[[str], None] | None = None) -> None:
        self._kube = kube
        self._key: str | None = None
        self._on_change = on_change
        self.leases = Informer(
            kube,
            Lease,
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_TUNNEL: operators.exists()},
            name="tunnel-leases",
            on_change=self._changed,
        )

    async def key(self) -> str:
        if self._key is None:
            self._key = await relay_key(self._kube)
        return self._key

    def holding(self, cluster: str) -> Holding | None:
        return holding(
            self.leases.get(f"{names.SYSTEM_NAMESPACE}/{names.tunnel_lease_name(cluster)}")
        )

    def _changed(self, event: str, obj: Obj) -> None:
        cluster = (obj["metadata"].get("labels") or {}).get(names.LABEL_TUNNEL)
        if self._on_change is not None and cluster:
            self._on_change(cluster)


def _parse(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
