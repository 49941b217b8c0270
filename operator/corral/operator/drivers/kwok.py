"""The builtin `kwok` driver: a machine is a simulated Node in the downstream cluster, kept
Ready by the cluster's kwok (which manages the nodes annotated `kwok.x-k8s.io/node: fake`).

`create` registers the node as a kubelet would, with the machine's own join credential
(`corral.core.kube.joining`), never with corral's: the node has the template's capacity, the
pool's labels and taints, and the label `names.LABEL_MACHINE` naming its machine, by which
`observe` and `delete` find it with corral's connection to the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.core_v1 import NodeSpec, NodeStatus, Taint
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.drivers import schema as driver_schema
from corral.core.errors import Invalid
from corral.core.kube.client import delete_if_present
from corral.core.kube.credential import client_for
from corral.operator.drivers.contract import Machine, MachineRequest, Phase

DEFAULTS = {field: spec["default"] for field, spec in driver_schema.KWOK["fields"].items()}
# What every kwok machine's node is labelled besides its pool's labels and its own names; the
# autoscaler's template node of a kwok pool has them too.
LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}


def capacity(config: Mapping[str, object]) -> dict[str, str]:
    merged = {**DEFAULTS, **config}
    return {"cpu": str(merged["cpu"]), "memory": str(merged["memory"]),
            "pods": str(merged["pods"])}  # fmt: skip


def node_for(request: MachineRequest) -> Node:
    labels = {
        **request.join.labels,
        "kubernetes.io/hostname": request.hostname,
        **LABELS,
        names.LABEL_MACHINE: request.name,
    }
    taints = [Taint(key=t["key"], value=t.get("value") or None, effect=t["effect"])
              for t in request.join.taints]  # fmt: skip
    resources = capacity(request.template)
    return Node(
        metadata=ObjectMeta(
            name=request.hostname,
            labels=labels,
            annotations={names.KWOK_NODE_ANNOTATION: names.KWOK_NODE_VALUE},
        ),
        spec=NodeSpec(providerID=provider_id(request.cluster, request.hostname),
                      taints=taints or None),
        status=NodeStatus(capacity=resources, allocatable=dict(resources)),
    )  # fmt: skip


def provider_id(cluster: str, hostname: str) -> str:
    return f"kwok://{cluster}/{hostname}"


@dataclass
class KwokDriver:
    """Connected to one cluster, through corral's client for it."""

    client: AsyncClient
    cluster: str
    name: str = names.KWOK_DRIVER

    async def observe(self, name: str) -> Machine | None:
        found = [n async for n in self.client.list(Node, labels={names.LABEL_MACHINE: name})]
        if not found:
            return None
        node = found[0]
        hostname = node.metadata.name if node.metadata and node.metadata.name else ""
        phase = (
            Phase.DELETING if node.metadata and node.metadata.deletionTimestamp else Phase.RUNNING
        )
        return Machine(name, phase, provider_id=provider_id(self.cluster, hostname))

    async def create(self, request: MachineRequest) -> Machine:
        join = request.join
        joined = client_for(Credential(server=join.server, ca_cert=join.ca_cert, token=join.token))
        try:
            try:
                await joined.create(node_for(request))
            except KubeApiError as exc:
                if exc.status.code != 409:
                    raise
                # Asked again after a crash: the node may be this machine's already.
                existing = await joined.get(Node, request.hostname)
                labels = (existing.metadata and existing.metadata.labels) or {}
                if labels.get(names.LABEL_MACHINE) != request.name:
                    raise Invalid(f"a node named {request.hostname} exists already") from None
        finally:
            await joined.close()
        return Machine(request.name, Phase.RUNNING,
                       provider_id=provider_id(request.cluster, request.hostname))  # fmt: skip

    async def delete(self, name: str) -> None:
        async for node in self.client.list(Node, labels={names.LABEL_MACHINE: name}):
            if node.metadata and node.metadata.name:
                await delete_if_present(self.client, Node, node.metadata.name)
