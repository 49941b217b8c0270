"""Cluster registration tokens in the management cluster (`corral.core.registration.tokens`):
the CR in the cluster's namespace and its value's Secret in svc-system.

The API server holds no Secret outside svc-system (least privilege, as for cloud credentials),
so the value is there, named afresh for every value and labelled with its token and cluster;
the CR names it. Each change is one atomic write of the CR: a creation is refused by name when
the token exists, a rotation by resourceVersion when someone changed it meanwhile, and the CR
never names a Secret that was not written first, so the value shown is always the one the
digest was taken of. A Secret left over by a refused write or a stopped process is found by
its labels and removed with its cluster.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from lightkube import ApiError, AsyncClient, operators
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.core.api import ids, names
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
from corral.core.kube.informer import Obj
from corral.core.registration import tokens

VALUE_KEY = "token"


async def create(
    kube: AsyncClient,
    cluster: str,
    name: str,
    now: datetime.datetime,
    ttl: int | None = None,
    machine: str = "",
) -> tuple[Obj, Obj]:
    """The new token and its Secret; the Kubernetes 409 when the name is taken."""
    value = tokens.new_value()
    secret = await _write_value(kube, cluster, name, value)
    spec = {"clusterName": cluster, "tokenHash": tokens.digest(value),
            "secretName": secret["metadata"]["name"]}  # fmt: skip
    if expires := tokens.expires_at(now, ttl):
        spec["expiresAt"] = expires
    if machine:
        spec["machine"] = machine
    metadata = ObjectMeta(name=name, namespace=cluster, labels={names.LABEL_CLUSTER: cluster})
    try:
        created = await kube.create(kinds.ClusterRegistrationToken(metadata=metadata, spec=spec))
    except BaseException:
        await delete_if_present(kube, Secret, secret["metadata"]["name"], names.SYSTEM_NAMESPACE)
        raise
    return as_dict(created), secret


async def rotate(kube: AsyncClient, token: Obj) -> tuple[Obj, Obj]:
    """A new value for `token` as it was read; the Kubernetes 409 when it changed since. The
    old value stops working with the write; its Secret goes after."""
    meta = token["metadata"]
    value = tokens.new_value()
    secret = await _write_value(kube, meta["namespace"], meta["name"], value)
    patch = {"metadata": {"resourceVersion": meta["resourceVersion"]},
             "spec": {"tokenHash": tokens.digest(value),
                      "secretName": secret["metadata"]["name"]}}  # fmt: skip
    try:
        rotated = await kube.patch(
            kinds.ClusterRegistrationToken, meta["name"], patch,
            namespace=meta["namespace"], patch_type=PatchType.MERGE,
        )  # fmt: skip
    except BaseException:
        await delete_if_present(kube, Secret, secret["metadata"]["name"], names.SYSTEM_NAMESPACE)
        raise
    old = token["spec"].get("secretName", "")
    if old:
        await delete_if_present(kube, Secret, old, names.SYSTEM_NAMESPACE)
    return as_dict(rotated), secret


async def delete(kube: AsyncClient, token: Obj) -> None:
    """Revokes: the CR first (the digest goes with it), then the value."""
    meta = token["metadata"]
    await delete_if_present(kube, kinds.ClusterRegistrationToken, meta["name"], meta["namespace"])
    secret = token["spec"].get("secretName", "")
    if secret:
        await delete_if_present(kube, Secret, secret, names.SYSTEM_NAMESPACE)


async def issue_for_machine(
    kube: AsyncClient, cluster: str, record: str, now: datetime.datetime
) -> str:
    """A new token that registers the machine `record` alone, once, within the hour; a token
    made for it before (a creation asked again) goes first. Returns the value, a secret."""
    await delete_named(kube, cluster, tokens.machine_token_name(record))
    _, secret = await create(kube, cluster, tokens.machine_token_name(record), now,
                             ttl=tokens.MACHINE_TOKEN_SECONDS, machine=record)  # fmt: skip
    return value_of(secret)


async def delete_named(kube: AsyncClient, cluster: str, name: str) -> None:
    """Revokes the token `name` of the cluster, if there is one."""
    try:
        token = await kube.get(kinds.ClusterRegistrationToken, name, namespace=cluster)
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        return
    await delete(kube, as_dict(token))


async def remove_cluster(kube: AsyncClient, cluster: str) -> None:
    """Every value of the cluster's tokens (the CRs go with its namespace)."""
    labels: dict[str, Any] = {
        names.LABEL_CLUSTER: cluster,
        names.LABEL_REGISTRATION_TOKEN: operators.exists(),
    }
    async for secret in kube.list(Secret, namespace=names.SYSTEM_NAMESPACE, labels=labels):
        if secret.metadata and secret.metadata.name:
            await delete_if_present(kube, Secret, secret.metadata.name, names.SYSTEM_NAMESPACE)


async def ensure_default(kube: AsyncClient, cluster: str, now: datetime.datetime) -> None:
    """The cluster's `default-token`, with a value: made when missing, rotated when its value
    is gone (a process stopped between its two writes)."""
    try:
        token = as_dict(await kube.get(kinds.ClusterRegistrationToken, tokens.DEFAULT_TOKEN,
                                       namespace=cluster))  # fmt: skip
    except ApiError as exc:
        if exc.status.code != 404:
            raise
        await create(kube, cluster, tokens.DEFAULT_TOKEN, now)
        return
    secret = token["spec"].get("secretName", "")
    try:
        if secret:
            await kube.get(Secret, secret, namespace=names.SYSTEM_NAMESPACE)
            return
    except ApiError as exc:
        if exc.status.code != 404:
            raise
    await rotate(kube, token)


def value_of(secret: Obj | None) -> str:
    """The token's value in its Secret; empty when there is none."""
    data = (secret or {}).get("data") or {}
    return base64.b64decode(data.get(VALUE_KEY, "")).decode() if VALUE_KEY in data else ""


async def _write_value(kube: AsyncClient, cluster: str, name: str, value: str) -> Obj:
    labels = {names.LABEL_REGISTRATION_TOKEN: name, names.LABEL_CLUSTER: cluster}
    metadata = ObjectMeta(name=ids.generate("crt-value"), namespace=names.SYSTEM_NAMESPACE,
                          labels=labels)  # fmt: skip
    data = {VALUE_KEY: base64.b64encode(value.encode()).decode()}
    return as_dict(await kube.create(Secret(metadata=metadata, type="Opaque", data=data)))
