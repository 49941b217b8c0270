"""Certificate rotation of a hosted control plane, the operator's half
(`corral.core.provisioning.rotation` decides what): the rotated Secrets written once per
rotation generation, corral's credential trusting the new CA while the control plane rolls, and
the event that says a renewal (`corral.core.provisioning.renewal`) is done.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from lightkube import AsyncClient, codecs

from corral.core.api import names
from corral.core.kube import cluster_secrets
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.provisioning import manifests, renewal, rotation
from corral.core.provisioning import pki as cp
from corral.operator import events
from corral.operator.state import State

log = logging.getLogger(__name__)

Found = dict[str, tuple[dict[str, Any], dict[str, bytes]]]


async def rotate(
    kube: AsyncClient,
    field_manager: str,
    cluster: str,
    addresses: cp.Addresses,
    request: rotation.Request,
    found: Found,
) -> bytes:
    """Replace the Secrets `request` names, unless this generation's are there already; the
    cluster CA now stored. Each written Secret carries the rotation's generation, so a pass cut
    short (an operator restart) writes only the rest, signed by the CAs it wrote, and the next
    rotation's passes issue nothing twice."""
    annotations = {name: meta.get("annotations") or {} for name, (meta, _) in found.items()}
    stored = {name: data for name, (_, data) in found.items()}
    mine = str(request.generation)
    done = [n for n in rotation.secrets(request) if
            annotations.get(n, {}).get(rotation.ANNOTATION_ROTATION) == mine]  # fmt: skip
    todo = [name for name in rotation.secrets(request) if name not in done]
    if not todo:
        return stored[cp.CA]["ca.crt"]
    generations = [int(a.get(manifests.ANNOTATION_PKI_GENERATION, 0)) for a in annotations.values()]
    # Resumed: the rotation's Secrets already carry its PKI generation; otherwise the next one.
    pki_generation = (
        int(annotations[done[0]][manifests.ANNOTATION_PKI_GENERATION])
        if done
        else max(generations, default=0) + 1
    )
    issued = rotation.reissue(request, cluster, addresses, stored, todo)
    for name in todo:
        secret = manifests.pki_secret(cluster, name, issued[name], pki_generation,
                                      {rotation.ANNOTATION_ROTATION: mine})  # fmt: skip
        await kube.apply(codecs.from_dict(secret), field_manager=field_manager, force=True)
    log.info(
        "cluster %s: certificate rotation %s issued %s (PKI generation %s)",
        cluster, mine, ", ".join(todo), pki_generation,
    )  # fmt: skip
    return issued[cp.CA]["ca.crt"] if cp.CA in issued else stored[cp.CA]["ca.crt"]


async def trust(state: State, field_manager: str, body: Obj, ca: bytes) -> None:
    """corral's credential for the cluster trusts exactly `ca` (one CA, or old and new while
    the control plane rolls); the connection registry rebuilds its client on the change."""
    cluster = body["metadata"]["name"]
    credential = state.connections.credential(cluster)
    if credential is None or credential.ca_cert == ca:
        return
    secret = cluster_secrets.credential_secret(body, dataclasses.replace(credential, ca_cert=ca))
    stored = await state.kube.apply(secret, field_manager=field_manager, force=True)
    state.connections.credentials.put(as_dict(stored))
    log.info("cluster %s: corral's credential trusts %d CA(s)", cluster, ca.count(b"BEGIN"))


async def renewed(state: State, field_manager: str, body: Obj, request: rotation.Request) -> None:
    """An event on the Cluster: which certificates were renewed and when they would have
    expired."""
    involved = events.reference(body, names.API_VERSION, names.CLUSTER.kind)
    await events.post(state.kube, involved, renewal.EVENT_REASON, renewal.event_message(request),
                      "Normal", field_manager, state.clock())  # fmt: skip
