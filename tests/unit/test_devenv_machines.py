"""The pure parts of the local cloud: the machines' addresses and route table, how a machine's
folders are mounted, and what its driver answers (tests/e2e/test_machines.py runs them)."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

import pytest

from corral.devenv import clouddriver, network
from corral.devenv.cloud import Cloud, CloudRefused
from corral.devenv.machine import OWN, Machine, Pid


def test_machines_and_nodes_never_share_an_address() -> None:
    nodes = {network.node_address(i) for i in range(network.MAX_NODES)}
    machines = {network.machine_address(i) for i in range(network.MAX_MACHINES)}
    assert len(nodes) == network.MAX_NODES and len(machines) == network.MAX_MACHINES
    assert not nodes & machines
    assert network.HOST_ADDRESS not in nodes | machines
    link = network.LINK_CIDR
    assert all(ipaddress.ip_address(a) in link for a in nodes | machines)
    assert str(link.broadcast_address) not in machines
    for outside in (-1, network.MAX_MACHINES):
        with pytest.raises(ValueError, match="out of range"):
            network.machine_address(outside)
    with pytest.raises(ValueError, match="out of range"):
        network.node_address(network.MAX_NODES)
    # Linux names a link in at most 15 characters.
    assert len(network.machine_veth(network.MAX_MACHINES - 1)) <= 15


def test_the_machines_route_table_sends_services_to_a_node_and_pods_to_theirs() -> None:
    assert network.HostNetwork().machine_routes() == []
    nodes = network.HostNetwork(nodes={1: 4001, 0: 4000})
    assert nodes.machine_routes() == [
        (network.SERVICE_CIDR, network.node_address(0)),
        (network.pod_cidr(0), network.node_address(0)),
        (network.pod_cidr(1), network.node_address(1)),
    ]


def machine_in(folder: Path, index: int = 0) -> Machine:
    return Machine("m-x", "x", index, "/corral-cloud/m-x", folder)


def binds(machine: Machine) -> list[str]:
    return [line.split()[-1] for line in machine._holder_script().splitlines()
            if line.startswith("mount --bind") and "/proc/sys/" not in line]  # fmt: skip


def test_a_machine_folder_that_its_own_var_would_cover_is_bound_last() -> None:
    assert binds(machine_in(Path("/work/state/m-x"))) == [f"/{d}" for d in OWN]
    under_var = binds(machine_in(Path("/var/lib/state/m-x")))
    assert under_var[-1] == "/var" and sorted(under_var) == sorted(f"/{d}" for d in OWN)


def test_the_driver_refuses_a_create_without_the_node_command(tmp_path: Path) -> None:
    cloud = Cloud(tmp_path)
    create = {"machine": {"name": "m-a", "hostname": "a"}, "join": {"token": "t"}}
    with pytest.raises(CloudRefused, match=r"join\.command is missing"):
        clouddriver.handle("create", create, cloud)
    with pytest.raises(CloudRefused, match="not a DNS label"):
        create = {"machine": {"name": "../etc"}, "join": {"command": "true"}}
        clouddriver.handle("create", create, cloud)
    assert not (tmp_path / "machines").exists()


def test_the_driver_answers_with_the_contracts_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(argv: list[str], stdin: str) -> tuple[int, object]:
        code = clouddriver.main(argv, stdin, tmp_path)
        return code, json.loads(capsys.readouterr().out)

    assert run(["schema"], "{}") == (0, {"fields": {}})
    assert run(["state"], '{"machine": {"name": "m-none"}}') == (0, {"exists": False})
    assert run(["remove"], '{"machine": {"name": "m-none"}}') == (0, {})
    assert run(["reboot"], '{"machine": {"name": "m-none"}}') == (
        2, {"message": "unknown command 'reboot'"}
    )  # fmt: skip
    assert run(["state"], "not json") == (2, {"message": "stdin is not JSON"})
    assert run(["state"], "{}") == (2, {"message": "machine.name is missing"})
    # A cloud nobody opened makes nothing, and may work later.
    create = '{"machine": {"name": "m-a"}, "join": {"command": "true"}}'
    code, answer = run(["create"], create)
    assert code == 1 and "is not running" in str(answer)


def booted(folder: Path, outcome: dict[str, object] | None, output: str = "") -> Machine:
    machine = machine_in(folder, index=3)
    (folder / "pids").mkdir(parents=True)
    if outcome is not None:
        (folder / "boot.json").write_text(json.dumps(outcome))
    log = machine.rootfs / "var/log/cloud-init-output.log"
    log.parent.mkdir(parents=True)
    log.write_text(output)
    return machine


def test_a_machines_phase_follows_its_boot_and_join_command(tmp_path: Path) -> None:
    this = Pid.of(os.getpid())
    gone = Pid(this.pid, this.start + 1)  # the same number, another process

    booting = booted(tmp_path / "booting", None)
    booting.record_pid("boot", this)
    assert clouddriver.state(booting) == {
        "exists": True, "phase": "Provisioning", "message": "",
        "providerId": "corral-local://m-x", "addresses": [network.machine_address(3)],
    }  # fmt: skip

    lost = booted(tmp_path / "lost", None)
    lost.record_pid("boot", gone)
    assert clouddriver.state(lost)["phase"] == "Failed"

    failed = booted(tmp_path / "failed", {"exitCode": 7}, "fetching\ncurl: (7) refused\n")
    assert (clouddriver.state(failed)["phase"], clouddriver.state(failed)["message"]) == (
        "Failed", "its join command exited with 7: curl: (7) refused"
    )  # fmt: skip

    broken = booted(tmp_path / "broken", {"error": "no bridge"})
    assert clouddriver.state(broken)["message"] == "the machine did not start: no bridge"

    joined = booted(tmp_path / "joined", {"exitCode": 0})
    joined.record_pid("init", this)
    assert clouddriver.state(joined)["phase"] == "Running"
    joined.record_pid("init", gone)
    assert clouddriver.state(joined) | {"addresses": []} == {
        "exists": True, "phase": "Failed", "message": "the machine has stopped",
        "providerId": "corral-local://m-x", "addresses": [],
    }  # fmt: skip
