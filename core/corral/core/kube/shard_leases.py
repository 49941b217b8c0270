"""The Leases by which operator replicas share the clusters (docs/design/operator-sharding.md),
in svc-system: a member Lease per replica, renewed while the replica lives, and a shard Lease
per shard, naming the member that runs the shard's clusters. A shard Lease is written only
when it changes hands, each time with the resourceVersion it was read at, so that of two
replicas taking one shard only one succeeds; it stands while its holder's member Lease does.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from lightkube import ApiError, AsyncClient, operators
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.types import PatchType

from corral.core.api import names
from corral.core.clusters import shards
from corral.core.kube.client import FIELD_MANAGER, as_dict, delete_if_present
from corral.core.kube.informer import Informer, Obj
from corral.core.times import format_micro_time

NAMESPACE = names.SYSTEM_NAMESPACE
SHARD_PREFIX = names.operator_shard_lease_name(0)[:-1]
# A member Lease not renewed for this long is a replica that died without leaving: deleted.
GONE_AFTER = datetime.timedelta(hours=1)


class ShardLeases:
    """This replica's view of the member and shard Leases, and its writes to them."""

    def __init__(
        self, kube: AsyncClient, identity: str, on_change: Callable[[], None] | None = None
    ) -> None:
        self._kube = kube
        self.identity = identity
        self._acquired: datetime.datetime | None = None
        self.leases = Informer(
            kube,
            Lease,
            namespace=NAMESPACE,
            labels={
                names.LABEL_OPERATOR_LEASE: operators.in_(
                    [names.OPERATOR_LEASE_MEMBER, names.OPERATOR_LEASE_SHARD]
                )
            },
            name="operator-leases",
            on_change=(lambda _event, _obj: on_change()) if on_change else None,
        )

    # -- reading --------------------------------------------------------------------------------

    def members(self) -> list[shards.Lease]:
        return [shards.Lease.of(obj) for obj in self._of(names.OPERATOR_LEASE_MEMBER)]

    def holders(self) -> dict[int, str]:
        """The member each shard's Lease names, by shard; a released shard is absent."""
        found: dict[int, str] = {}
        for obj in self._of(names.OPERATOR_LEASE_SHARD):
            shard = shard_number(obj["metadata"]["name"])
            holder = (obj.get("spec") or {}).get("holderIdentity")
            if shard is not None and holder:
                found[shard] = holder
        return found

    def _of(self, kind: str) -> list[Obj]:
        return [
            obj
            for obj in self.leases.all()
            if (obj["metadata"].get("labels") or {}).get(names.LABEL_OPERATOR_LEASE) == kind
        ]

    # -- writing --------------------------------------------------------------------------------

    async def renew(self, now: datetime.datetime) -> None:
        """This replica is a member until `now` + LEASE_SECONDS."""
        if self._acquired is None:
            self._acquired = now
        lease = Lease(
            metadata=ObjectMeta(
                name=names.operator_member_lease_name(self.identity),
                namespace=NAMESPACE,
                labels={names.LABEL_OPERATOR_LEASE: names.OPERATOR_LEASE_MEMBER},
            ),
            spec=LeaseSpec(
                holderIdentity=self.identity,
                leaseDurationSeconds=shards.LEASE_SECONDS,
                acquireTime=self._acquired,
                renewTime=now,
            ),
        )
        self.leases.put(as_dict(await self._kube.apply(lease, field_manager=FIELD_MANAGER,
                                                        force=True)))  # fmt: skip

    async def leave(self) -> None:
        """This replica is a member no longer: the others need not wait for its Lease to
        expire to take what it let go. Its Lease goes: every pod has a name of its own, and
        kept Leases would pile up with each rollout."""
        await delete_if_present(
            self._kube, Lease, names.operator_member_lease_name(self.identity), NAMESPACE
        )

    async def forget_gone(self, now: datetime.datetime) -> None:
        """Deletes the member Leases of replicas gone for longer than GONE_AFTER without
        leaving (killed, their node lost)."""
        for obj in self._of(names.OPERATOR_LEASE_MEMBER):
            lease = shards.Lease.of(obj)
            if lease.renewed is None or now - lease.renewed > GONE_AFTER:
                await delete_if_present(self._kube, Lease, obj["metadata"]["name"], NAMESPACE)

    async def take(self, shard: int, now: datetime.datetime) -> bool:
        """Whether this replica now holds the shard: False when another wrote its Lease since
        it was read (the next look says who holds it)."""
        name = names.operator_shard_lease_name(shard)
        current = self.leases.get(f"{NAMESPACE}/{name}")
        try:
            if current is None:
                labels = {names.LABEL_OPERATOR_LEASE: names.OPERATOR_LEASE_SHARD}
                spec = LeaseSpec(
                    holderIdentity=self.identity,
                    leaseDurationSeconds=shards.LEASE_SECONDS,
                    acquireTime=now,
                    renewTime=now,
                    leaseTransitions=0,
                )
                lease = Lease(metadata=ObjectMeta(name=name, namespace=NAMESPACE, labels=labels),
                              spec=spec)  # fmt: skip
                self.leases.put(as_dict(await self._kube.create(lease)))
                return True
            transitions = (current.get("spec") or {}).get("leaseTransitions") or 0
            await self._write(current, {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": shards.LEASE_SECONDS,
                "acquireTime": format_micro_time(now),
                "renewTime": format_micro_time(now),
                "leaseTransitions": transitions + 1,
            })  # fmt: skip
        except ApiError as exc:
            if exc.status.code in (404, 409):
                return False
            raise
        return True

    async def release(self, shard: int) -> None:
        """Lets go of a shard this replica holds; one another took meanwhile stays theirs."""
        current = self.leases.get(f"{NAMESPACE}/{names.operator_shard_lease_name(shard)}")
        if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        try:
            await self._write(current, {"holderIdentity": None})
        except ApiError as exc:
            if exc.status.code not in (404, 409):
                raise

    async def _write(self, current: Obj, spec: dict[str, Any]) -> None:
        meta = current["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": spec}
        written = await self._kube.patch(
            Lease, meta["name"], patch, namespace=NAMESPACE, patch_type=PatchType.MERGE
        )
        self.leases.put(as_dict(written))


def shard_number(name: str) -> int | None:
    """The shard a shard Lease's name names; None for another name."""
    number = name.removeprefix(SHARD_PREFIX)
    return int(number) if number != name and number.isdigit() else None
