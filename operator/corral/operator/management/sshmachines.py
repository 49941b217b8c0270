"""Machines added over SSH (`customConfig`; "Machines over SSH" in docs/api.md and
docs/conditions.md): each is installed once with the cluster's node command, and uninstalled
when its record is deleted.

A record labelled `node-source: ssh` names a Secret in svc-system holding the SSH key. One
pass connects (the host key recorded at the first connection, a changed one refused), checks
that root can be had and that containerd is there, and runs the node command of a
registration token of the machine's own (single-use, an hour) as root. The outcome is the
record's `Provisioned`, with `Initialized` and `Registered` (False until the node joins), under
the field manager `corral-ssh-machines`; once the node has joined, the node mirror writes
those conditions and this reconciler writes nothing more. A failed pass is retried by kopf
with a delay doubling up to RETRY_MAX; a failed installer is followed by its uninstall, so
nothing half-installed stays on the machine. The API server writes the record before the
Secret with its key (the record is what claims the hostname), so a record seen without its
Secret waits for it quietly for KEY_GRACE before saying the key is missing.

Deleting the record runs the uninstall over SSH (best effort: a failure is a Warning event on
the record, and does not keep it), removes its node and join credential from the cluster, its
registration token and the Secret with the key. Neither the key nor the node command (which
holds a token) is ever logged.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import kopf
from lightkube import ApiError
from lightkube.resources.core_v1 import Node as DownstreamNode
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.conditions import Condition
from corral.core.drivers import custom
from corral.core.kube import joining, kinds, registration_tokens
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.kube.status import StatusWriter
from corral.core.registration import tokens
from corral.core.times import format_time, parse_time
from corral.operator.management import ssh
from corral.operator.state import State

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-ssh-machines"
# Seconds a step may take on the machine: root and containerd are checked at once; the
# installer downloads the node binaries and imports the images.
CHECK_TIMEOUT = 30.0
INSTALL_TIMEOUT = 900.0
UNINSTALL_TIMEOUT = 120.0
# Retries of a failed pass: the first soon (an address that comes up, a key fixed in
# authorized_keys), then doubling.
RETRY_FIRST = 10.0
RETRY_MAX = 300.0
# How long a new record waits for its key's Secret, written a moment after it, before that is
# reported; and how often it looks meanwhile.
KEY_GRACE = 30.0
KEY_WAIT = 1.0
# A cluster that cannot be reached while a machine goes holds its deletion this long at most.
CLUSTER_TIMEOUT = 10.0
SSH_MACHINES = {names.LABEL_NODE_SOURCE: names.NODE_SOURCE_SSH}


class KeyNotYet(Exception):
    """A new record's key Secret is not written yet."""


def retry_delay(retry: int) -> float:
    return float(min(RETRY_MAX, RETRY_FIRST * 2 ** min(retry, 10)))


class SSHMachines:
    def __init__(self, state: State) -> None:
        self.state = state
        self.writer = StatusWriter(state.kube, FIELD_MANAGER, state.clock)

    async def provision(self, record: Obj) -> None:
        """One pass: installed, or `ssh.Failed` with why (written on the record first)."""
        meta = record["metadata"]
        found = (record.get("status") or {}).get("conditions") or []
        annotations = meta.get("annotations") or {}
        if names.ANNOTATION_SSH_INSTALLED in annotations or conditions.is_true(
            found, ct.REGISTERED
        ):
            return
        try:
            await self._install(record)
        except ssh.Failed as failed:
            if failed.reason == ct.REASON_SSH_KEY_MISSING and self._new(record):
                raise KeyNotYet from None
            await self._write(record, Condition.of(ct.PROVISIONED, False, failed.reason,
                                                   failed.message))  # fmt: skip
            raise
        await self._write(
            record,
            Condition.of(ct.PROVISIONED, True, ct.REASON_PROVISIONED,
                         "installed over SSH; the node joins the cluster"),
        )  # fmt: skip

    def _new(self, record: Obj) -> bool:
        created = parse_time(record["metadata"]["creationTimestamp"])
        return (self.state.clock() - created).total_seconds() < KEY_GRACE

    async def _install(self, record: Obj) -> None:
        meta, spec = record["metadata"], record["spec"]
        cluster, name = meta["namespace"], meta["name"]
        config = custom.CustomConfig.of(spec.get(custom.FIELD) or {})
        key = await self._key(spec)
        corral = self.state.corral
        if corral is None:
            raise ssh.Failed(ct.REASON_INSTALL_FAILED,
                             "the operator was not given corral's URL (CORRAL_EXTERNAL_URL): "
                             "machines cannot reach it")  # fmt: skip
        recorded = (meta.get("annotations") or {}).get(names.ANNOTATION_SSH_HOST_KEY, "")
        await self._write(record, Condition(ct.PROVISIONED, "Unknown", ct.REASON_INSTALLING,
                                            f"connecting to {config.address}"))  # fmt: skip
        async with ssh.connect(config, key, recorded) as session:
            if not recorded:
                # Recorded before anything runs: from now on only this key is trusted.
                record = await self._annotate(record, names.ANNOTATION_SSH_HOST_KEY,
                                              session.host_key)  # fmt: skip
            root = await session.run(custom.as_root("true", config.user), CHECK_TIMEOUT)
            if not root.ok:
                raise ssh.Failed(ct.REASON_INSTALL_FAILED,
                                 f"user {config.user} cannot run commands as root without a "
                                 f"password (sudo -n): {root.output}")  # fmt: skip
            containerd = await session.run(
                custom.as_root(custom.containerd_check(), config.user), CHECK_TIMEOUT
            )
            if not containerd.ok:
                raise ssh.Failed(ct.REASON_CONTAINERD_MISSING,
                                 f"containerd is not running on the machine (no socket at "
                                 f"{custom.CONTAINERD_SOCKET}, or no ctr): install and start "
                                 "it, and corral tries again")  # fmt: skip
            value = await registration_tokens.issue_for_machine(
                self.state.kube, cluster, name, self.state.clock()
            )
            command = custom.install(corral.node_command(value), spec["requestedHostname"],
                                     config)  # fmt: skip
            await self._write(record, Condition(ct.PROVISIONED, "Unknown", ct.REASON_INSTALLING,
                                                "running the node installer"))  # fmt: skip
            installed = await session.run(custom.as_root(command, config.user), INSTALL_TIMEOUT)
            if installed.ok:
                finished = await session.run(
                    custom.as_root(custom.installed_check(), config.user), CHECK_TIMEOUT
                )
                if not finished.ok:
                    installed = ssh.Result(
                        1,
                        f"{installed.output}\nthe installer did not finish: "
                        f"can the machine reach {corral.url}?".lstrip(),
                    )
            if not installed.ok:
                await self._forget_token(cluster, name)
                undone = await session.run(
                    custom.as_root(custom.uninstall(), config.user), UNINSTALL_TIMEOUT
                )
                # The machine registered before it failed: its join credential would
                # otherwise stay valid in the cluster until the record is deleted.
                await self._forget_node(cluster, name, spec["requestedHostname"])
                after = "" if undone.ok else f"; its uninstall failed too: {undone.output}"
                raise ssh.Failed(ct.REASON_INSTALL_FAILED,
                                 f"the installer exited with {installed.exit_status}: "
                                 f"{installed.output}{after}")  # fmt: skip
        await self._annotate(record, names.ANNOTATION_SSH_INSTALLED,
                             format_time(self.state.clock()))  # fmt: skip

    async def remove(self, record: Obj) -> str:
        """Everything the machine's record stands for; why its uninstall failed, or ""."""
        meta, spec = record["metadata"], record["spec"]
        cluster, name = meta["namespace"], meta["name"]
        failure = ""
        recorded = (meta.get("annotations") or {}).get(names.ANNOTATION_SSH_HOST_KEY, "")
        # Without a recorded host key nothing ever ran there: nothing to undo.
        if recorded:
            failure = await self._uninstall(spec, recorded)
        await self._forget_node(cluster, name, spec["requestedHostname"])
        await self._forget_token(cluster, name)
        secret = (spec.get(custom.FIELD) or {}).get("sshKeySecretName")
        if secret:
            await delete_if_present(self.state.kube, Secret, secret, names.SYSTEM_NAMESPACE)
        return failure

    async def _uninstall(self, spec: dict[str, Any], recorded: str) -> str:
        config = custom.CustomConfig.of(spec.get(custom.FIELD) or {})
        try:
            key = await self._key(spec)
            async with ssh.connect(config, key, recorded) as session:
                done = await session.run(
                    custom.as_root(custom.uninstall(), config.user), UNINSTALL_TIMEOUT
                )
        except ssh.Failed as failed:
            return str(failed)
        return "" if done.ok else f"the uninstall exited with {done.exit_status}: {done.output}"

    async def _forget_node(self, cluster: str, name: str, hostname: str) -> None:
        """The node and its join credential, when the cluster can be reached."""
        try:
            async with asyncio.timeout(CLUSTER_TIMEOUT):
                client = await self.state.connections.client(cluster)
                await delete_if_present(client, DownstreamNode, hostname)
                await joining.revoke(client, name)
        except Exception as exc:  # noqa: BLE001 - a cluster that is going is not waited for
            log.warning("cluster %s: node %s not removed: %s", cluster, hostname, exc)

    async def _forget_token(self, cluster: str, name: str) -> None:
        await registration_tokens.delete_named(
            self.state.kube, cluster, tokens.machine_token_name(name)
        )

    async def _key(self, spec: dict[str, Any]) -> str:
        secret_name = (spec.get(custom.FIELD) or {}).get("sshKeySecretName", "")
        try:
            secret = await self.state.kube.get(
                Secret, secret_name, namespace=names.SYSTEM_NAMESPACE
            )
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            raise ssh.Failed(ct.REASON_SSH_KEY_MISSING,
                             f"the Secret {secret_name} holding the SSH key is not there "
                             "(yet): add the node again if it does not come") from None  # fmt: skip
        data = (secret.data or {}).get(names.SSH_KEY_FIELD, "")
        return base64.b64decode(data).decode()

    async def _annotate(self, record: Obj, annotation: str, value: str) -> Obj:
        meta = record["metadata"]
        patched = await self.state.kube.patch(
            kinds.Node, meta["name"], {"metadata": {"annotations": {annotation: value}}},
            namespace=meta["namespace"], patch_type=PatchType.MERGE,
        )  # fmt: skip
        return as_dict(patched)

    async def _write(self, record: Obj, provisioned: Condition) -> None:
        meta = record["metadata"]
        try:
            await self.writer.apply(
                kinds.Node, meta["name"], meta["namespace"], seen=record,
                conditions=[
                    Condition.of(ct.INITIALIZED, True, ct.REASON_INITIALIZED),
                    provisioned,
                    Condition.of(ct.REGISTERED, False, ct.REASON_WAITING_FOR_NODE,
                                 "the machine's node has not joined yet"),
                ],
            )  # fmt: skip
        except ApiError as exc:
            if exc.status.code != 404:  # deleted meanwhile
                raise


def _machines(memo: kopf.Memo) -> SSHMachines:
    machines: SSHMachines = memo.ssh_machines
    return machines


@kopf.on.resume(names.GROUP, names.VERSION, names.NODE.plural, labels=SSH_MACHINES)
@kopf.on.create(names.GROUP, names.VERSION, names.NODE.plural, labels=SSH_MACHINES)
async def ssh_machine_install(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
    try:
        await _machines(memo).provision(dict(body))
    except KeyNotYet:
        raise kopf.TemporaryError("waiting for the SSH key's Secret", delay=KEY_WAIT) from None
    except ssh.Failed as failed:
        raise kopf.TemporaryError(str(failed), delay=retry_delay(retry)) from None


@kopf.on.delete(names.GROUP, names.VERSION, names.NODE.plural, labels=SSH_MACHINES)
async def ssh_machine_remove(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    failure = await _machines(memo).remove(dict(body))
    if failure:
        kopf.warn(body, reason=ct.REASON_UNINSTALL_FAILED,
                  message=f"the machine was not uninstalled: {failure}")  # fmt: skip
