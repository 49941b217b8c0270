"""The local cloud as a node driver: an executable that keeps docs/drivers.md's contract, so
the operator drives real machines (cloud.py) as it would any user's driver.

`create` makes a machine and returns at once, `Provisioning`; the machine boots in a process
of its own and runs `join.command`, the node command, as root, as cloud-init would run a VM's
user data. `state` then says `Running` once that command succeeded and `Failed` (with the last
line of its output) if it did not. Everything is keyed by `machine.name`. The environment
writes the executable (write()) into its folder of driver files, with the cloud's state folder
in it: nothing on the command line or in the environment names it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from corral.devenv.cloud import Cloud, CloudNotRunning, CloudRefused
from corral.devenv.machine import Machine

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
PROVIDER = "corral-local://"
MAX_MESSAGE = 512

SCRIPT = """#!{python}
# The local cloud's node driver (corral.devenv.clouddriver); its machines are kept in {state}.
import sys
from pathlib import Path

from corral.devenv.clouddriver import main

sys.exit(main(sys.argv[1:], sys.stdin.read(), Path({state!r})))
"""


def write(path: Path, state: Path) -> str:
    """Write the driver executable to `path`, its machines kept in `state`; its sha256."""
    content = SCRIPT.format(python=sys.executable, state=str(state)).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(0o755)
    return hashlib.sha256(content).hexdigest()


def main(argv: list[str], stdin: str, state: Path) -> int:
    """Answer one command of the contract on stdout; the exit status the contract asks."""
    try:
        try:
            message = json.loads(stdin)
        except json.JSONDecodeError:
            raise CloudRefused("stdin is not JSON") from None
        if len(argv) != 1 or not isinstance(message, dict):
            raise CloudRefused("usage: <driver> schema|create|state|remove, JSON on stdin")
        answer = handle(argv[0], message, Cloud(state))
    except CloudRefused as exc:
        return _fail(EXIT_REFUSED, str(exc))
    except (CloudNotRunning, OSError, RuntimeError, ValueError, KeyError) as exc:
        return _fail(EXIT_FAILED, str(exc) or type(exc).__name__)
    print(json.dumps(answer))
    return EXIT_OK


def handle(command: str, message: dict[str, Any], cloud: Cloud) -> dict[str, Any]:
    if command == "schema":
        return {"fields": {}}
    name = _field(message, "machine", "name")
    if command == "create":
        join = message.get("join") or {}
        node_command = join.get("command") if isinstance(join, dict) else None
        if not isinstance(node_command, str) or not node_command.strip():
            raise CloudRefused(
                "join.command is missing: a machine of the local cloud joins its cluster by "
                "running the node command, which this corral does not give"
            )
        hostname = message["machine"].get("hostname") or name
        return state(cloud.request(name, hostname, node_command))
    if command == "state":
        machine = cloud.get(name)
        return state(machine) if machine is not None else {"exists": False}
    if command == "remove":
        cloud.remove(name)
        return {}
    raise CloudRefused(f"unknown command {command[:64]!r}")


def state(machine: Machine) -> dict[str, Any]:
    """The contract's view of a machine: Provisioning while it boots and runs its join
    command, Running once that succeeded, Failed otherwise."""
    phase, message = "Provisioning", ""
    outcome = _outcome(machine)
    if outcome is None:
        boot = machine.pid("boot")
        if boot is None or not boot.alive():
            phase, message = "Failed", "the machine stopped while it was booting"
    elif "error" in outcome:
        phase, message = "Failed", f"the machine did not start: {outcome['error']}"
    elif outcome.get("exitCode") != 0:
        output = machine.rootfs / "var/log/cloud-init-output.log"
        last = _last_line(output)
        phase = "Failed"
        message = f"its join command exited with {outcome.get('exitCode')}: {last}"
    elif not machine.running():
        phase, message = "Failed", "the machine has stopped"
    else:
        phase = "Running"
    return {"exists": True, "phase": phase, "message": message[:MAX_MESSAGE],
            "providerId": PROVIDER + machine.name, "addresses": [machine.address]}  # fmt: skip


def _outcome(machine: Machine) -> dict[str, Any] | None:
    try:
        outcome: dict[str, Any] = json.loads((machine.dir / "boot.json").read_text())
    except FileNotFoundError:
        return None
    return outcome


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _field(message: dict[str, Any], *keys: str) -> str:
    value: Any = message
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, str):
        raise CloudRefused(f"{'.'.join(keys)} is missing")
    return value


def _fail(code: int, message: str) -> int:
    print(json.dumps({"message": message[:MAX_MESSAGE]}))
    return code
