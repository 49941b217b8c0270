"""The network between the control planes and the real nodes.

    host                                  node netns (one per real node)
    corral0 10.254.0.1/24  ── veth ──  eth0 10.254.0.10+i ── cni0 bridge ── pods 10.244.100+i.0/24
    (control planes bind here)          kube-proxy's iptables rules live here

Each node has a network namespace of its own, so what a node changes in the network (the
bridge's `ip_forward`, kube-proxy's iptables chains, conntrack) happens inside it and vanishes
with it. The host keeps `ip_forward` off: it only answers for its own address and routes the
Service and pod ranges to a node, which is enough for the host and the pods to reach each other.
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


def node_address(index: int) -> str:
    return str(LINK_CIDR.network_address + 10 + index)


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
        peer = ["peer", "name", "eth0", "netns", str(namespace_pid)]
        run(["ip", "link", "add", veth, "type", "veth", *peer])
        self.veths.append(veth)
        run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
        inside = _ip_in(namespace_pid)
        run([*inside, "addr", "add", f"{node_address(index)}/{LINK_CIDR.prefixlen}", "dev", "eth0"])
        run([*inside, "link", "set", "eth0", "up"])
        run([*inside, "route", "add", "default", "via", HOST_ADDRESS])
        # Pods of every other node are one hop away, through that node, both ways.
        for other, other_pid in self.nodes.items():
            run([*inside, "route", "add", pod_cidr(other), "via", node_address(other)])
            run([*_ip_in(other_pid), "route", "add", pod_cidr(index), "via", node_address(index)])
        self.nodes[index] = namespace_pid
        run(["ip", "route", "add", pod_cidr(index), "via", node_address(index)])
        if len(self.nodes) == 1:
            # kube-proxy runs on every node, so any node can take the host's Service traffic.
            run(["ip", "route", "add", SERVICE_CIDR, "via", node_address(index)])

    def delete(self) -> None:
        """Remove the veths and the bridge; their routes go with them."""
        for veth in self.veths:
            if _link_exists(veth):
                run(["ip", "link", "del", veth])
        self.veths.clear()
        self.nodes.clear()
        if self.created and _link_exists(BRIDGE):
            run(["ip", "link", "del", BRIDGE])
        self.created = False


def _ip_in(namespace_pid: int) -> list[str]:
    return ["nsenter", "-t", str(namespace_pid), "-n", "ip"]


def _link_exists(name: str) -> bool:
    try:
        run(["ip", "link", "show", name])
    except RuntimeError:
        return False
    return True
