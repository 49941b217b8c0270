"""The network between the control planes, the real nodes and the machines.

    host                                  node netns (one per real node)
    corral0 10.254.0.1/24  ── veth ──  eth0 10.254.0.10+i ── cni0 bridge ── pods 10.244.100+i.0/24
    (control planes bind here)          kube-proxy's iptables rules live here
            │
            └───────────── veth ──  eth0 10.254.0.100+j   machine netns (one per machine)

Each node and each machine has a network namespace of its own, so what it changes in the
network (the bridge's `ip_forward`, kube-proxy's iptables chains, conntrack) happens inside it
and vanishes with it. Nodes take 10.254.0.10-99, machines 10.254.0.100-199: they never collide.

The host keeps `ip_forward` off: it only answers for its own address and routes the Service and
pod ranges to a node, which is enough for the host and the pods to reach each other. Machines
are a cloud's VMs in one VPC with the management cluster: the bridge is their subnet, and their
route table sends the management cluster's Service range (where the hosted apiservers'
ClusterIPs live) to the first node, whose kube-proxy rules take it, and each node's pod range to
that node, so that the pods' replies (a hosted apiserver calling a kubelet) come back. The
nodes reach the machines on the bridge itself.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from corral.devenv.host import run

BRIDGE = "corral0"
LINK_CIDR = ipaddress.ip_network("10.254.0.0/24")
HOST_ADDRESS = "10.254.0.1"
# The management cluster's Service range (kube-apiserver --service-cluster-ip-range).
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDRS = ipaddress.ip_network("10.244.0.0/16")


FIRST_NODE, MAX_NODES = 10, 90
FIRST_MACHINE, MAX_MACHINES = 100, 100
Route = tuple[str, str]  # (destination, via)


def node_address(index: int) -> str:
    if not 0 <= index < MAX_NODES:
        raise ValueError(f"node index {index} is out of range: at most {MAX_NODES} nodes")
    return str(LINK_CIDR.network_address + FIRST_NODE + index)


def machine_address(index: int) -> str:
    if not 0 <= index < MAX_MACHINES:
        raise ValueError(f"machine index {index} is out of range: at most {MAX_MACHINES}")
    return str(LINK_CIDR.network_address + FIRST_MACHINE + index)


def machine_veth(index: int) -> str:
    return f"corralm{index}"


def pod_cidr(index: int) -> str:
    return f"10.244.{100 + index}.0/24"


def veth_name(index: int) -> str:
    return f"corralv{index}"


@dataclass
class HostNetwork:
    """The host side: bridge, one veth per node, routes to the nodes' pods and Services."""

    # node index -> PID of a process inside that node's network namespace
    nodes: dict[int, int] = field(default_factory=dict)
    veths: list[str] = field(default_factory=list)
    created: bool = False

    def create(self) -> None:
        if _link_exists(BRIDGE):
            raise RuntimeError(
                f"a network device {BRIDGE} exists already: another environment with real "
                "nodes is running on this host (stop it first)"
            )
        run(["ip", "link", "add", "name", BRIDGE, "type", "bridge"])
        self.created = True
        run(["ip", "addr", "add", f"{HOST_ADDRESS}/{LINK_CIDR.prefixlen}", "dev", BRIDGE])
        run(["ip", "link", "set", BRIDGE, "up"])

    def attach(self, index: int, namespace_pid: int) -> None:
        """Link the network namespace of `namespace_pid` to the bridge as node `index`."""
        veth = veth_name(index)
        self.veths.append(veth)
        # Pods of every other node are one hop away, through that node, both ways.
        routes = [(pod_cidr(other), node_address(other)) for other in self.nodes]
        link_namespace(veth, namespace_pid, node_address(index), routes)
        for other_pid in self.nodes.values():
            run([*_ip_in(other_pid), "route", "add", pod_cidr(index), "via", node_address(index)])
        self.nodes[index] = namespace_pid
        run(["ip", "route", "add", pod_cidr(index), "via", node_address(index)])
        if len(self.nodes) == 1:
            # kube-proxy runs on every node, so any node can take the host's Service traffic.
            run(["ip", "route", "add", SERVICE_CIDR, "via", node_address(index)])

    def machine_routes(self) -> list[Route]:
        """The route table of the machines: the Service range through the first node, each
        node's pods through that node."""
        if not self.nodes:
            return []
        first = min(self.nodes)
        pods = [(pod_cidr(index), node_address(index)) for index in sorted(self.nodes)]
        return [(SERVICE_CIDR, node_address(first)), *pods]

    def delete(self) -> None:
        """Remove the veths and the bridge; their routes go with them."""
        for veth in self.veths:
            delete_link(veth)
        self.veths.clear()
        self.nodes.clear()
        if self.created and _link_exists(BRIDGE):
            run(["ip", "link", "del", BRIDGE])
        self.created = False


def link_namespace(veth: str, namespace_pid: int, address: str, routes: list[Route]) -> None:
    """Link the network namespace of `namespace_pid` to the bridge through the veth `veth`,
    its end inside being `eth0` with `address`, the host its default gateway, and `routes`."""
    peer = ["peer", "name", "eth0", "netns", str(namespace_pid)]
    run(["ip", "link", "add", veth, "type", "veth", *peer])
    run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
    inside = _ip_in(namespace_pid)
    run([*inside, "addr", "add", f"{address}/{LINK_CIDR.prefixlen}", "dev", "eth0"])
    run([*inside, "link", "set", "eth0", "up"])
    run([*inside, "route", "add", "default", "via", HOST_ADDRESS])
    for destination, via in routes:
        run([*inside, "route", "add", destination, "via", via])


def bridge_exists() -> bool:
    return _link_exists(BRIDGE)


def delete_link(name: str) -> None:
    """Delete a veth (both its ends) if it is still there: a veth goes by itself, a moment
    after the network namespace of its other end is gone."""
    try:
        run(["ip", "link", "del", name])
    except RuntimeError:
        if _link_exists(name):
            raise


def _ip_in(namespace_pid: int) -> list[str]:
    return ["nsenter", "-t", str(namespace_pid), "-n", "ip"]


def _link_exists(name: str) -> bool:
    try:
        run(["ip", "link", "show", name])
    except RuntimeError:
        return False
    return True
