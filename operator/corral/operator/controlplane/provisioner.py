"""The provisioner of one rke2 or k3s cluster: it brings the cluster's hosted control plane up
through the runtime and gets corral into it, then keeps it as the spec says.

Each pass, in order, each step idempotent so that a pass cut short (an operator restart) is
finished by the next:

1. the release of `spec.kubernetesVersion` from the version catalog;
2. the control plane's addresses (Services), then its certificates;
3. what runs (the plan), made to match;
4. until etcd and the control plane are Ready, what is awaited and why it is stuck;
5. corral's own credential, installed with the control plane's bootstrap administrator and
   stored as an import stores it, with a claim on the cluster's identity; its token comes from
   the TokenRequest API and is renewed here before it expires;
6. the pod network its machines need (controlplane/network.py).

The leaf certificates are renewed before they expire through a `rotateCertificates` the
provisioner asks for itself (`_ask_renewal`), carried out as a user's is; a timer wakes it when
the next leaf falls due.

The provisioner writes only `status.provisioning` (field manager `corral-provisioning`); the
cluster's conditions stay the health writer's, which reads it (`observe.cluster_conditions`).
From step 5 on, the cluster is reached like any imported one: the agent's health, node mirror,
pools and projects work unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lightkube import ApiError

from corral.core import jsonpatch
from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.clusters.observe import MAX_MESSAGE
from corral.core.errors import CorralError, Invalid
from corral.core.kube import agent, claims, cluster_secrets, guarded, kinds, registration_tokens
from corral.core.kube.client import as_dict, ensure_namespace
from corral.core.kube.informer import Obj
from corral.core.kube.status import StatusWriter
from corral.core.provisioning import agent_token, catalog, manifests, renewal, rotation, upgrade
from corral.core.provisioning import restore as rs
from corral.operator.controlplane import inputs, probe, restore
from corral.operator.controlplane import rotation as rotating
from corral.operator.controlplane.network import PodNetwork
from corral.operator.controlplane.runtime import ControlPlaneRuntime
from corral.operator.controlplane.starts import Starts
from corral.operator.state import State
from corral.operator.wakeups import Wake, Wakeups

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-provisioning"
# How soon the next pass comes while the control plane is on its way, and once it is up
# (a change of the spec wakes it at once, and of its workloads while it is on its way; the
# cluster's health is the agent's, every 5 s).
BUSY_INTERVAL = 2.0
IDLE_INTERVAL = 30.0
TOKEN_SECONDS = int(agent_token.LIFETIME.total_seconds())


@dataclass(frozen=True)
class Progress:
    """What a pass found: the step it stopped at and why (`message`), or `ready`."""

    step: str
    message: str = ""
    ready: bool = False
    endpoint: str = ""
    version: str = ""
    # The restore record (`core.provisioning.restore`), written on every pass: etcd's data
    # directory lives there.
    restore: Mapping[str, object] | None = None
    rotated: int = 0  # the last certificate rotation carried out, by generation
    # Waiting for a start slot (`Starts`): the next pass comes when one may be free.
    queued: bool = False

    def fields(self) -> dict[str, object]:
        found: dict[str, object] = {"step": self.step, "message": self.message[:MAX_MESSAGE]}
        found |= self.restore or {}
        found["ready"] = self.ready
        if self.endpoint:
            found["endpoint"] = self.endpoint
        if self.version:
            found["appliedVersion"] = self.version
        if self.rotated:
            found[rotation.STATUS_FIELD] = self.rotated
        return {"provisioning": found}


class Provisioner:
    def __init__(
        self,
        cluster: str,
        state: State,
        runtime: ControlPlaneRuntime,
        starts: Starts,
        on_change: Callable[[], None],
    ) -> None:
        self.cluster = cluster
        self.state = state
        self.runtime = runtime
        # Shared by the replica's provisioners: how many new control planes start at once.
        self.starts = starts
        # Tells the cluster's agent, whose health writer shows the progress on the conditions.
        self.on_change = on_change
        self.wakeups = Wakeups()
        self.writer = StatusWriter(state.kube, FIELD_MANAGER, state.clock)
        self.network = PodNetwork(cluster, state)
        self.last: Progress | None = None
        # Whether this process has seen the cluster's default registration token in place.
        self.default_token = False

    def wake(self, reason: Wake) -> None:
        if reason in (Wake.SPEC, Wake.TIMER, Wake.CREDENTIAL):
            self.wakeups.add(reason)

    async def run(self) -> None:
        """Pass after pass, until cancelled."""
        await self.state.synced()
        self.wakeups.add(Wake.TIMER)
        watching: asyncio.Task[None] | None = None
        try:
            while True:
                await self.wakeups.wait()
                self.wakeups.take()
                progress = await self.step()
                watching = self._watch(watching, progress)
                self.wakeups.after(self._interval(progress), Wake.TIMER)
        finally:
            self.starts.done(self.cluster)
            if watching is not None:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await watching

    def _interval(self, progress: Progress) -> float:
        """How long until the next pass with nothing to wake it sooner. A queued control
        plane is woken when a slot comes free (`Starts.done`); until then its passes would
        only read the same workloads again, eight clusters' worth of them every two seconds
        while ten start at once."""
        if progress.ready:
            return IDLE_INTERVAL
        if progress.queued:
            return max(self.starts.until_free(), BUSY_INTERVAL)
        return BUSY_INTERVAL

    def _watch(
        self, watching: asyncio.Task[None] | None, progress: Progress
    ) -> asyncio.Task[None] | None:
        """While the control plane is on its way, a watch of its workloads, so that a pod
        becoming Ready is acted on at once rather than at the next timer. A watch that failed
        is started again at the next pass; the timer goes on meanwhile."""
        if progress.ready:
            if watching is not None:
                watching.cancel()
            return None
        if watching is not None and not watching.done():
            return watching
        if watching is not None and not watching.cancelled() and watching.exception():
            log.debug("cluster %s: watch of the control plane ended: %s", self.cluster,
                      watching.exception())  # fmt: skip
        changed = functools.partial(self.wakeups.add, Wake.WORKLOAD)
        return asyncio.create_task(self.runtime.watch(self.cluster, changed))

    async def step(self) -> Progress:
        body = self.state.clusters.get(self.cluster)
        if body is None or body["metadata"].get("deletionTimestamp"):
            self.starts.done(self.cluster)
            return Progress("Deleting")
        try:
            progress = await self._provision(body)
        except CorralError as exc:
            progress = Progress("Failed", exc.message)
        except ApiError as exc:
            progress = Progress("Failed", f"the management cluster refused: {exc.status.message}")
        except Exception as exc:  # noqa: BLE001 - shown on the cluster and tried again
            progress = Progress("Failed", f"{type(exc).__name__}: {exc}")
        if progress.restore is None:
            kept = rs.record((body.get("status") or {}).get("provisioning"))
            progress = dataclasses.replace(progress, restore=kept.fields())
        # Every write carries the rotation done and the version applied, or a failed pass
        # would undo them (a version change would then count as applied unrolled).
        done = ((body or {}).get("status") or {}).get("provisioning") or {}
        if not progress.rotated:
            progress = dataclasses.replace(
                progress, rotated=int(done.get(rotation.STATUS_FIELD) or 0)
            )
        if not progress.version:
            progress = dataclasses.replace(progress, version=upgrade.applied(done))
        if progress != self.last:
            level = logging.WARNING if progress.step == "Failed" else logging.INFO
            log.log(level, "cluster %s: %s %s", self.cluster, progress.step, progress.message)
        await self._write(body, progress)
        if progress.ready and not self.default_token:
            await self._make_default_token()
        return progress

    async def _make_default_token(self) -> None:
        """The cluster's `default-token`, once it can take machines; tried again next pass
        when the write fails."""
        try:
            await registration_tokens.ensure_default(self.state.kube, self.cluster,
                                                     self.state.clock())  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the next pass tries again
            log.warning("cluster %s: default registration token not made: %s", self.cluster, exc)
            return
        self.default_token = True

    async def _provision(self, body: Obj) -> Progress:
        spec = body["spec"]
        version = upgrade.current(spec)
        release = inputs.release(self.state.settings, version)
        provisioning = (body.get("status") or {}).get("provisioning")
        # A version change rolls a control plane corral is in; one still coming up simply
        # comes up at the spec's version.
        source = (
            upgrade.upgrading(spec, provisioning)
            if self.state.connections.credential(self.cluster) is not None
            else None
        )
        storage_class = inputs.storage_class(self.state.settings)
        kube = self.state.kube
        if self.last is None or not self.last.ready:
            await ensure_namespace(kube, self.cluster, {names.LABEL_CLUSTER: self.cluster})
        addresses = await self.runtime.address(self.cluster)
        body = await self._ask_renewal(body)
        owed = self._rotation_owed(body)
        if owed is not None:
            ca = await self.runtime.rotate_certificates(self.cluster, addresses, owed)
            current = self.state.connections.credential(self.cluster)
            await rotating.trust(
                self.state,
                FIELD_MANAGER,
                body,
                rotation.trusted(current.ca_cert if current else None, ca),
            )
        generations = await self.runtime.certificates(self.cluster, addresses)
        plan = manifests.Plan(
            cluster=self.cluster,
            flavour=spec["driver"],
            release=release,
            addresses=addresses,
            pki_generation=generations.control_plane,
            etcd_pki_generation=generations.etcd,
            storage_class=storage_class,
        )
        record, plan = await restore.advance(kube, self.runtime, spec, provisioning, plan)
        kept = record.fields()
        etcd_rolled = True
        if source is not None:
            previous = self._release(source)
            if upgrade.etcd_changes(previous, release):
                image = release.component(catalog.ETCD).image
                etcd_rolled = await self.runtime.etcd_rolled(self.cluster, generations.etcd, image)
                if not etcd_rolled:
                    # etcd first: the Deployment keeps the old release until etcd has rolled.
                    plan = dataclasses.replace(plan, previous=previous)
        queued = 0

        def admit() -> bool:
            nonlocal queued
            queued = self.starts.admit(
                self.cluster, functools.partial(self.wakeups.add, Wake.TIMER)
            )
            return not queued

        # Only a control plane corral has never been in waits for a start slot.
        new = self.state.connections.credential(self.cluster) is None
        await self.runtime.ensure(plan, admit if new else None)
        if record.restore is not None and record.restore.running:
            return Progress("Restoring", rs.message(record), restore=kept)
        if queued:
            waiting = (f"etcd is Ready; waiting to start: {self.starts.limit} control planes are "
                       f"starting, {queued - 1} more before this one")  # fmt: skip
            return Progress("WaitingForControlPlane", waiting, restore=kept, queued=True)
        seen = await self.runtime.observe(self.cluster)
        if seen.ready:
            self.starts.done(self.cluster)
        running = source or version  # the version the control plane runs until a roll is over
        rotated = 0  # none this pass: the write keeps the generation done before
        if owed is not None:
            if not (seen.ready and await self.runtime.etcd_rolled(self.cluster, generations.etcd)):
                waiting = seen.message or "waiting for etcd"
                return Progress(rotation.STEP, f"{rotation.message(owed)}: {waiting}",
                                restore=kept)  # fmt: skip
            # Certificates and token are issued together and fall due together: a token that
            # expired while the operator was away would keep the probe below out for good.
            await self._keep_token(body)
            if not await probe.ready(self.state, self.cluster):
                waiting = "waiting for kube-apiserver to answer /readyz"
                return Progress(rotation.STEP, f"{rotation.message(owed)}: {waiting}",
                                restore=kept)  # fmt: skip
            # Rolled: nothing serves a certificate of the old CA any more.
            await rotating.trust(self.state, FIELD_MANAGER, body, ca)
            log.info("cluster %s: certificate rotation %s is done", self.cluster, owed.generation)
            if owed.expires:
                await rotating.renewed(self.state, FIELD_MANAGER, body, owed)
            rotated = owed.generation
            if source is None:
                return Progress("Provisioned", ready=True, endpoint=addresses.server,
                                version=running, restore=kept, rotated=rotated)  # fmt: skip
            # A renewal that joined a version change: the same roll carries the new release.
        if source is not None:
            # /version is asked once the pods are rolled: before, it may answer from either.
            served: str | None = None
            if seen.ready:
                served = await probe.served_version(self.state, self.cluster)
            awaited = upgrade.waiting(
                source, version, etcd_rolled=etcd_rolled, seen=seen, served=served
            )
            if awaited is not None:
                return Progress(upgrade.STEP, awaited, endpoint=addresses.server, version=source,
                                restore=kept, rotated=rotated)  # fmt: skip
            log.info("cluster %s: the control plane runs %s, was %s", self.cluster, version,
                     source)  # fmt: skip
        if not seen.ready:
            return Progress("WaitingForControlPlane", seen.message, restore=kept)
        if self.state.connections.credential(self.cluster) is None:
            await self._get_in(body)
        else:
            await self._keep_token(body)
        await self.network.ensure(spec, release)
        return Progress("Provisioned", ready=True, endpoint=addresses.server, version=version,
                        restore=kept, rotated=rotated)  # fmt: skip

    def _release(self, version: str) -> catalog.Release | None:
        """The catalog's release of `version`; None when the catalog no longer has it."""
        try:
            return inputs.release(self.state.settings, version)
        except Invalid:
            return None

    def _rotation_owed(self, body: Obj) -> rotation.Request | None:
        """The rotation asked for and not yet done; none before corral is in the cluster (the
        certificates of a control plane still coming up are new anyway)."""
        if self.state.connections.credential(self.cluster) is None:
            return None
        provisioning = (body.get("status") or {}).get("provisioning")
        return rotation.requested(body["spec"], provisioning)

    async def _ask_renewal(self, body: Obj) -> Obj:
        """A rotation of the services whose leaf certificates are due, stored in
        `spec.rotateCertificates` as the API stores a user's, for the rotation below to carry
        out; the Cluster as written. Asked only of a control plane corral is in and that nothing
        else rolls, one operation at a time, except for a leaf that has expired
        (`renewal.blocked`). Otherwise a timer for when the next leaf falls due, or expires
        while something else holds the renewal back: a pass with nothing due reads only what
        the runtime has read already."""
        if self.state.connections.credential(self.cluster) is None:
            return body
        now = self.state.clock()
        expiries = await self.runtime.expiries(self.cluster)
        if renewal.wanted(body, expiries, now) is not None:
            return await self._write_renewal(body, expiries, now)
        if renewal.blocked(body, expiries, now):
            wake = renewal.expiry_in(expiries, now)
        else:
            wake = renewal.wake_in(expiries, now)
        if wake is not None:
            self.wakeups.after(wake, Wake.RENEWAL)
        return body

    async def _write_renewal(
        self, body: Obj, expiries: dict[str, datetime.datetime], now: datetime.datetime
    ) -> Obj:
        """The renewal's rotation stored in `spec.rotateCertificates`; the Cluster as written."""

        async def decide(current: Obj) -> list[jsonpatch.Operation]:
            asked = renewal.wanted(current, expiries, now)
            return [] if asked is None else [jsonpatch.add(current, ("spec", rotation.ACTION),
                                                           asked.spec())]  # fmt: skip

        # Written on condition that the spec is still as read: a user's rotation or version
        # change asked meanwhile is decided on again, never overwritten.
        written = await guarded.patch(self.state.kube, kinds.Cluster, self.cluster, decide,
                                      [guarded.GENERATION], current=body,
                                      field_manager=FIELD_MANAGER)  # fmt: skip
        self.state.clusters.put(written)
        asked = rotation.Request.from_spec(written["spec"])
        if asked is not None and asked.expires:
            log.info("cluster %s: %s (rotation %s)", self.cluster, rotation.message(asked),
                     asked.generation)  # fmt: skip
        return written

    async def _get_in(self, body: Obj) -> None:
        """corral's service account in the new cluster, with a claim on its identity and the
        credential stored as an import stores it."""
        admin = await self.runtime.bootstrap_credential(self.cluster)
        identity = await agent.identify(admin)
        installed = await agent.install_agent(admin, TOKEN_SECONDS)
        holder = await claims.backfill(self.state.kube, identity, body)
        if holder is not None:
            raise CorralError(f"the new control plane's identity is claimed by {holder}")
        await self._store(body, installed.credential)
        log.info("cluster %s: corral's credential is stored", self.cluster)

    async def _keep_token(self, body: Obj) -> None:
        credential = self.state.connections.credential(self.cluster)
        if credential is not None and agent_token.renewal_due(credential.token, self.state.clock()):
            await self._renew_token(body, credential)

    async def _renew_token(self, body: Obj, credential: Credential) -> None:
        """A new token before corral's expires, asked with the bootstrap administrator, which
        still gets one when the operator was away until after it expired."""
        admin = await self.runtime.bootstrap_credential(self.cluster)
        token = await agent.request_token(admin, TOKEN_SECONDS)
        await self._store(body, dataclasses.replace(credential, token=token))
        log.info("cluster %s: corral's token is renewed", self.cluster)

    async def _store(self, body: Obj, credential: Credential) -> None:
        secret = cluster_secrets.credential_secret(body, credential)
        stored = await self.state.kube.apply(secret, field_manager=FIELD_MANAGER, force=True)
        self.state.connections.credentials.put(as_dict(stored))

    async def _write(self, body: Obj, progress: Progress) -> None:
        self.last = progress
        try:
            written = await self.writer.apply(
                kinds.Cluster, self.cluster, seen=body, fields=progress.fields()
            )
        except Exception as exc:  # noqa: BLE001 - the next pass writes again
            log.warning("cluster %s: provisioning status write failed: %s", self.cluster, exc)
            return
        if written is not None:
            self.state.clusters.put(written)
            self.on_change()
