"""Approving the certificate requests of a provisioned cluster's kubelets.

Only corral knows which machine a join credential belongs to, so only corral approves the
certificates a joining kubelet asks for (core/provisioning/kubelets.py decides which). The
cluster's controller manager signs what corral approved. Approving is corral's own act on a
cluster it provisioned, so it goes with corral's credential.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import cast

from lightkube import AsyncClient
from lightkube.resources.certificates_v1 import CertificateSigningRequestApproval

from corral.core.kube import joining
from corral.core.kube.informer import Obj
from corral.core.provisioning import kubelets
from corral.core.times import format_time
from corral.operator.state import BY_CLUSTER, State

log = logging.getLogger(__name__)

REASON = "CorralApproved"


async def approve_pending(
    cluster: str, state: State, client: AsyncClient, requests: Iterable[Obj], nodes: Iterable[Obj]
) -> int:
    """Approve what corral should among `requests`, the cluster's CertificateSigningRequests;
    how many it approved."""
    records = state.nodes.by_index(BY_CLUSTER, cluster)
    hostnames = {r["spec"].get("requestedHostname") for r in records} - {None}
    accounts = {
        f"system:serviceaccount:{joining.JOIN_NAMESPACE}:{joining.account_name(r['metadata']['name'])}":
            r["spec"]["requestedHostname"]
        for r in records if r["spec"].get("requestedHostname")
    }  # fmt: skip
    addresses = {
        node["metadata"]["name"]: frozenset(
            a.get("address", "") for a in (node.get("status") or {}).get("addresses") or []
        )
        for node in nodes
        if node["metadata"]["name"] in hostnames
    }
    approved = 0
    for body in requests:
        if not kubelets.pending(body):
            continue
        request = kubelets.read(body)
        why = kubelets.approval(request, accounts, addresses) if request is not None else None
        if request is None or why is None:
            continue
        await _approve(client, body, why, state)
        log.info("cluster %s: approved %s: %s", cluster, request.name, why)
        approved += 1
    return approved


async def _approve(client: AsyncClient, body: Obj, why: str, state: State) -> None:
    status = dict(body.get("status") or {})
    status["conditions"] = [
        *(status.get("conditions") or []),
        {"type": "Approved", "status": "True", "reason": REASON, "message": why,
         "lastUpdateTime": format_time(state.clock())},
    ]  # fmt: skip
    approval = cast(
        CertificateSigningRequestApproval,
        CertificateSigningRequestApproval.from_dict({**body, "status": status}),
    )
    await client.replace(approval, body["metadata"]["name"])
