"""Kubernetes events the operator posts on the objects it manages: what `kubectl describe` and
the API's event lists show of their life. An event is worth a log line when refused, never a
failed pass."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import EventSource, ObjectReference
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Event

log = logging.getLogger(__name__)

# Where the events of a cluster-scoped object (a Cluster) go: an event must have a namespace.
CLUSTER_SCOPED_NAMESPACE = "default"


def reference(obj: Mapping[str, Any], api_version: str, kind: str) -> ObjectReference:
    meta = obj["metadata"]
    return ObjectReference(apiVersion=api_version, kind=kind, name=meta["name"],
                           namespace=meta.get("namespace"), uid=meta.get("uid"))  # fmt: skip


async def post(
    client: AsyncClient,
    involved: ObjectReference,
    reason: str,
    message: str,
    kind: str,
    component: str,
    now: datetime.datetime,
) -> None:
    """One event (`kind` Normal or Warning) on `involved`, in its namespace."""
    event = Event(
        metadata=ObjectMeta(
            generateName=f"{involved.name}.",
            namespace=involved.namespace or CLUSTER_SCOPED_NAMESPACE,
        ),
        involvedObject=involved,
        reason=reason,
        message=message,
        type=kind,
        source=EventSource(component=component),
        firstTimestamp=now,
        lastTimestamp=now,
        count=1,
    )
    try:
        await client.create(event)
    except ApiError as exc:
        log.info("cannot post event %s on %s %s: %s", reason, involved.kind, involved.name, exc)
