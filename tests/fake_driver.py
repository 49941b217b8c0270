"""A node driver executable for the tests: a Python script that keeps the contract of
docs/drivers.md, keeping its machines as files in a directory, and writing down every run (its
command, argv and environment) so that a test can tell whether, and how, it was run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCRIPT = """#!{python}
import json, os, sys, time
from pathlib import Path
from typing import Any

STATE = Path({state!r})
ASKED = {variant!r}  # makes otherwise equal drivers differ (and their checksums)
command = sys.argv[1]
message = json.load(sys.stdin)
STATE.mkdir(parents=True, exist_ok=True)
with (STATE / "runs.jsonl").open("a") as runs:
    runs.write(json.dumps({{"command": command, "argv": sys.argv, "env": dict(os.environ),
                           "cwd": os.getcwd()}}) + "\\n")
config = message.get("config") or {{}}
if config.get("behave") == "refuse":
    print(json.dumps({{"message": "no such region: " + str(config.get("region"))}}))
    sys.exit(2)
if config.get("behave") == "crash":
    print("boom: the cloud is down", file=sys.stderr)
    sys.exit(1)
if config.get("behave") == "hang":
    time.sleep(60)
if config.get("behave") == "chatter":
    sys.stdout.write("x" * 10_000_000)
    sys.exit(0)
if command == "schema":
    print(json.dumps({{"fields": {{
        "region": {{"type": "string", "required": True, "description": "Where"}},
        "size": {{"type": "int", "default": 2}},
        "behave": {{"type": "string"}},
        "apiKey": {{"type": "string", "secret": True}},
    }}}}))
    sys.exit(0)
machine = STATE / (message["machine"]["name"] + ".json")
if command == "create":
    if not machine.exists():
        machine.write_text(json.dumps({{"phase": "Running", "providerId": "fake://" +
                                        message["machine"]["name"], "addresses": ["10.0.0.7"]}}))
    print(json.dumps({{"exists": True, **json.loads(machine.read_text())}}))
elif command == "state":
    if machine.exists():
        print(json.dumps({{"exists": True, **json.loads(machine.read_text())}}))
    else:
        print(json.dumps({{"exists": False}}))
elif command == "remove":
    machine.unlink(missing_ok=True)
    print("{{}}")
else:
    print(json.dumps({{"message": "unknown command " + command}}))
    sys.exit(2)
"""


def script(state: Path, variant: str = "") -> bytes:
    """The driver's bytes: it keeps its machines and its record of runs in `state`."""
    return SCRIPT.format(python=sys.executable, state=str(state), variant=variant).encode()


def write(path: Path, state: Path, variant: str = "") -> Path:
    path.write_bytes(script(state, variant))
    path.chmod(0o755)
    return path


def runs(state: Path) -> list[dict[str, Any]]:
    """Every run of the driver so far, oldest first."""
    record = state / "runs.jsonl"
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]
