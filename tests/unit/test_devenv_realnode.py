"""The pure parts of the real-node setup: what is recorded for undoing, and the address plan."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from corral.devenv import network
from corral.devenv.host import HostChanges


def test_host_changes_remove_exactly_the_folders_they_made(tmp_path: Path) -> None:
    kept = tmp_path / "existed"
    kept.mkdir()
    changes = HostChanges()
    changes.mkdir(kept / "a" / "b" / "c")
    changes.mkdir(tmp_path / "other")
    (kept / "a" / "b" / "c" / "nested-empty").mkdir()  # made later, e.g. a cgroup child
    changes.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existed"]
    assert list(kept.iterdir()) == []


def test_host_changes_leave_a_folder_that_still_holds_a_file(tmp_path: Path) -> None:
    changes = HostChanges()
    changes.mkdir(tmp_path / "made")
    (tmp_path / "made" / "data").write_text("not ours to delete")
    changes.undo()
    assert (tmp_path / "made" / "data").read_text() == "not ours to delete"


def test_address_plan_keeps_nodes_pods_and_services_apart() -> None:
    host = ipaddress.ip_address(network.HOST_ADDRESS)
    nodes = [ipaddress.ip_address(network.node_address(i)) for i in range(20)]
    pods = [ipaddress.ip_network(network.pod_cidr(i)) for i in range(20)]
    services = ipaddress.ip_network(network.SERVICE_CIDR)
    assert len(set(nodes)) == 20 and host not in nodes
    assert all(n in network.LINK_CIDR for n in [host, *nodes])
    assert all(p.subnet_of(network.POD_CIDRS) for p in pods)  # type: ignore[arg-type]
    assert not any(a.overlaps(b) for i, a in enumerate(pods) for b in pods[i + 1 :])
    assert not any(p.overlaps(services) or p.overlaps(network.LINK_CIDR) for p in pods)
