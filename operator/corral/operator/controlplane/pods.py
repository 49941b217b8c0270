"""The product's control-plane runtime: pods in the cluster's namespace of the management
cluster (docs/provisioning.md). The objects are `corral.core.provisioning.manifests`'; this
module only writes them, reads them back, and removes them.

A pass at rest costs the management cluster only what `observe` reads: an object is applied
again only when what it should be has changed, and the certificate Secrets, which only this
runtime writes, are read again only after it wrote them. Both are refreshed every RESYNC
seconds anyway, so a hand edit or deletion is undone within that time (and at once, for the
workloads, when `observe` finds one gone).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from lightkube import ApiError, AsyncClient, codecs
from lightkube.models.authorization_v1 import (
    ResourceAttributes,
    SelfSubjectAccessReviewSpec,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import PersistentVolumeClaim, Pod, Secret
from lightkube.resources.rbac_authorization_v1 import RoleBinding
from lightkube.types import CascadeType

from corral.core.api import names
from corral.core.clusters import importing
from corral.core.clusters.credential import Credential
from corral.core.kube import access
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.provisioning import manifests, progress, rotation
from corral.core.provisioning import pki as cp
from corral.operator.config import HostedGrant
from corral.operator.controlplane import rotation as rotating

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-provisioning"
SECRETS = (cp.CA, cp.ETCD_CA, cp.ETCD, cp.APISERVER, cp.CONTROLLER_MANAGER, cp.SCHEDULER,
           cp.KWOK, cp.ADMIN)  # fmt: skip
FIRST_GENERATION = 1
# The Secrets etcd mounts or is signed by: only a change of these rolls it.
ETCD_SECRETS = (cp.ETCD_CA, cp.ETCD)
GRANT_NAME = "corral-operator"
RESYNC = 300.0

Found = dict[str, tuple[dict[str, Any], dict[str, bytes]]]


class PodRuntime:
    def __init__(
        self,
        kube: AsyncClient,
        grant: HostedGrant | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.grant = grant
        self.clock = clock
        # Namespaces whose binding this runtime has seen in effect.
        self._bound: set[str] = set()
        # What was last applied, by (namespace, kind, name): its digest, when, and the answer.
        self._applied: dict[tuple[str, str, str], tuple[str, float, dict[str, Any]]] = {}
        # Each cluster's certificate Secrets as last read, and when.
        self._pki: dict[str, tuple[Found, float]] = {}
        # The leaves' expiries, by cluster, and the resourceVersions of the Secrets read.
        self._expiries: dict[str, tuple[tuple[str, ...], dict[str, datetime.datetime]]] = {}

    async def address(self, cluster: str) -> cp.Addresses:
        await self._bind(cluster)
        ips = {}
        for service in manifests.services(cluster):
            applied = await self._apply(service)
            ips[service["metadata"]["name"]] = applied["spec"]["clusterIP"]
        return cp.Addresses(
            namespace=cluster,
            apiserver_ip=ips[cp.APISERVER_SERVICE],
            etcd_ip=ips[cp.ETCD_SERVICE],
        )

    async def certificates(self, cluster: str, addresses: cp.Addresses) -> manifests.Generations:
        found = await self._secrets(cluster)
        missing = [
            name for name in SECRETS if name not in found or cp.outdated(name, found[name][1])
        ]
        if missing:
            self._pki.pop(cluster, None)
            await self._issue(cluster, addresses, found, missing)

        def highest(names: Iterable[str]) -> int:
            annotations = [
                (found[name][0].get("annotations") or {}) for name in names if name in found
            ]
            generations = [int(a.get(manifests.ANNOTATION_PKI_GENERATION, 0)) for a in annotations]
            return max(generations, default=FIRST_GENERATION) or FIRST_GENERATION

        return manifests.Generations(etcd=highest(ETCD_SECRETS), control_plane=highest(SECRETS))

    async def _issue(
        self,
        cluster: str,
        addresses: cp.Addresses,
        found: dict[str, tuple[dict[str, Any], dict[str, bytes]]],
        missing: list[str],
    ) -> None:
        """The missing Secrets, signed by the CAs there are (new ones when there are none);
        those that exist stay as they are, so a pass cut short is finished by the next."""
        data = {name: decoded for name, (_, decoded) in found.items()}
        if cp.CA in data and cp.ETCD_CA in data:
            authorities = cp.Authorities.load(data)
        else:
            authorities = cp.Authorities.create(cluster)
            missing = list(SECRETS)
        sa_key = next(
            (data[name]["sa.key"] for name in (cp.APISERVER, cp.CONTROLLER_MANAGER)
             if name in data and "sa.key" in data[name]),
            None,
        ) or cp.new_service_account_key()  # fmt: skip
        issued = cp.issue(authorities, addresses, sa_key)
        for name in missing:
            secret = manifests.pki_secret(cluster, name, issued[name], FIRST_GENERATION)
            await self.kube.apply(codecs.from_dict(secret), field_manager=FIELD_MANAGER, force=True)
        log.info("cluster %s: certificates issued: %s", cluster, ", ".join(missing))

    async def _secrets(self, cluster: str, fresh: bool = False) -> Found:
        cached = self._pki.get(cluster)
        if cached is not None and not fresh and self.clock() - cached[1] < RESYNC:
            return dict(cached[0])
        found = {}
        for name in SECRETS:
            try:
                secret = await self.kube.get(Secret, name, namespace=cluster)
            except ApiError as exc:
                if exc.status.code == 404:
                    continue
                raise
            body = as_dict(secret)
            found[name] = (body["metadata"], cp.decode(body.get("data") or {}))
        if all(name in found for name in SECRETS):
            self._pki[cluster] = (found, self.clock())
        return dict(found)

    async def expiries(self, cluster: str) -> dict[str, datetime.datetime]:
        found = await self._secrets(cluster)
        versions = tuple(str(meta.get("resourceVersion")) for meta, _ in found.values())
        known = self._expiries.get(cluster)
        if known is None or known[0] != versions:
            # Parsed again only when a Secret changed: a pass at rest parses nothing.
            data = {name: decoded for name, (_, decoded) in found.items()}
            known = (versions, cp.expiries(data))
            self._expiries[cluster] = known
        return dict(known[1])

    async def rotate_certificates(
        self, cluster: str, addresses: cp.Addresses, request: rotation.Request
    ) -> bytes:
        found = await self._secrets(cluster, fresh=True)
        self._pki.pop(cluster, None)
        return await rotating.rotate(self.kube, FIELD_MANAGER, cluster, addresses, request, found)

    async def etcd_rolled(
        self, cluster: str, pki_generation: int, image: str | None = None
    ) -> bool:
        statefulset = await self._get(StatefulSet, "etcd", cluster)
        return rotation.rolled(statefulset, pki_generation, image)

    async def ensure(self, plan: manifests.Plan, admit: Callable[[], bool] | None = None) -> None:
        await self._apply(manifests.configuration(plan))
        await self._apply(manifests.etcd(plan))
        if await self._control_plane_due(plan.cluster, admit):
            await self._apply(manifests.control_plane(plan))

    async def _control_plane_due(self, cluster: str, admit: Callable[[], bool] | None) -> bool:
        """Whether the control-plane Deployment may be applied: once it exists, always; before,
        only once etcd is Ready and `admit` lets it start. An apiserver that cannot reach its
        etcd exits, and the kubelet backs its restarts off (10, 20, 40 s): ten control planes
        started together on two cores lost most of a minute that way, and their restarts' CPU
        besides. etcd itself starts at once, so a control plane let start finds it Ready."""
        if (cluster, "Deployment", manifests.CONTROL_PLANE) in self._applied:
            return True
        if await self._get(Deployment, manifests.CONTROL_PLANE, cluster) is not None:
            return True
        statefulset = await self._get(StatefulSet, "etcd", cluster)
        return progress.etcd_ready(statefulset) and (admit is None or admit())

    async def observe(self, cluster: str) -> progress.Seen:
        statefulset = await self._get(StatefulSet, "etcd", cluster)
        deployment = await self._get(Deployment, manifests.CONTROL_PLANE, cluster)
        # A workload found gone is applied again at once; the Deployment is made only after
        # etcd is Ready (`_control_plane_due`), so its absence before counts only once applied.
        applied = (cluster, "Deployment", manifests.CONTROL_PLANE) in self._applied
        if statefulset is None or (deployment is None and applied):
            self._forget(cluster)
        pods = [
            as_dict(p)
            async for p in self.kube.list(
                Pod, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}
            )
        ]
        claims = [
            as_dict(c)
            async for c in self.kube.list(
                PersistentVolumeClaim, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}
            )
        ]
        return progress.control_plane(statefulset, deployment, pods, claims)

    async def watch(self, cluster: str, changed: Callable[[], None]) -> None:
        async def follow(kind: type[StatefulSet] | type[Deployment]) -> None:
            watched = self.kube.watch(
                kind, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}
            )
            async for _ in watched:
                changed()

        async with asyncio.TaskGroup() as group:
            group.create_task(follow(StatefulSet))
            group.create_task(follow(Deployment))

    async def bootstrap_credential(self, cluster: str) -> Credential:
        secret = await self.kube.get(Secret, cp.ADMIN, namespace=cluster)
        kubeconfig = cp.decode(secret.data or {})["kubeconfig"]
        return importing.parse_kubeconfig(base64.b64encode(kubeconfig).decode())

    async def remove(self, cluster: str) -> bool:
        self._forget(cluster)
        try:
            await self._bind(cluster)
        except ApiError as exc:
            if exc.status.code == 404:
                return True  # no namespace: nothing was ever made
            raise
        await delete_if_present(self.kube, Deployment, manifests.CONTROL_PLANE, cluster)
        await delete_if_present(self.kube, StatefulSet, "etcd", cluster)
        # Backup and restore Jobs: their pods hold the claims.
        async for job in self.kube.list(
            Job, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}
        ):
            if job.metadata and job.metadata.name and not job.metadata.deletionTimestamp:
                await self.kube.delete(
                    Job, job.metadata.name, namespace=cluster, cascade=CascadeType.BACKGROUND
                )
        left = 0
        async for claim in self.kube.list(
            PersistentVolumeClaim, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}
        ):
            left += 1
            if claim.metadata and claim.metadata.name and not claim.metadata.deletionTimestamp:
                await delete_if_present(
                    self.kube, PersistentVolumeClaim, claim.metadata.name, cluster
                )
        async for _ in self.kube.list(
            Pod, namespace=cluster, labels={names.LABEL_CLUSTER: cluster}
        ):
            left += 1
        return left == 0

    async def _bind(self, cluster: str) -> None:
        """The chart's role for hosted control planes, bound to the operator in this cluster's
        namespace (`HostedGrant`); the binding goes with the namespace."""
        if self.grant is None:
            return
        binding = RoleBinding(
            # Not `managed-by: corral`: in the cluster `local` (the management cluster) the
            # project sync takes RoleBindings so labelled for its own and removes them.
            metadata=ObjectMeta(name=GRANT_NAME, namespace=cluster,
                                labels={names.LABEL_CLUSTER: cluster}),
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole",
                            name=self.grant.role),
            subjects=[Subject(kind="ServiceAccount", name=self.grant.service_account,
                              namespace=self.grant.namespace)],
        )  # fmt: skip
        await self._apply(binding.to_dict())
        if cluster not in self._bound:
            await self._until_bound(cluster)
            self._bound.add(cluster)

    async def _until_bound(self, cluster: str) -> None:
        review = SelfSubjectAccessReview(spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(
                namespace=cluster, verb="create", resource="services")))  # fmt: skip
        await access.until_allowed(self.kube, review, f"the operator's role in {cluster}")

    async def _apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as applied; not applied again while it is what was applied last, within
        RESYNC."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), obj["kind"], meta["name"])
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        last = self._applied.get(key)
        if last is not None and last[0] == digest and self.clock() - last[1] < RESYNC:
            return last[2]
        applied = as_dict(
            await self.kube.apply(codecs.from_dict(obj), field_manager=FIELD_MANAGER, force=True)
        )
        self._applied[key] = (digest, self.clock(), applied)
        return applied

    def _forget(self, cluster: str) -> None:
        """What this runtime remembers of the cluster: read and applied again next time."""
        self._pki.pop(cluster, None)
        self._expiries.pop(cluster, None)
        self._applied = {k: v for k, v in self._applied.items() if k[0] != cluster}

    async def _get(self, kind: Any, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return as_dict(await self.kube.get(kind, name, namespace=namespace))
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise
