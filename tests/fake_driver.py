"""A node driver executable for the tests: a Python script that keeps the contract of
docs/drivers.md, keeping its machines as files in a directory, and writing down every run (its
command, argv and environment) so that a test can tell whether, and how, it was run. With
`register` in its config, a machine it makes joins its cluster as a kwok node, with the join
credential it was given; the node command it is given for a real machine is kept beside the
machine (`<machine>.join`)."""

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
        "register": {{"type": "boolean", "description": "the machine joins as a kwok node"}},
    }}}}))
    sys.exit(0)
machine = STATE / (message["machine"]["name"] + ".json")
joined = STATE / (message["machine"]["name"] + ".joined")  # its boot, done once


def register(join: dict[str, Any], hostname: str, provider_id: str) -> None:
    # Boot the machine: its node joins as a kubelet would, with the machine's own join
    # credential, as a node the cluster's kwok keeps Ready.
    import base64, ssl, urllib.error, urllib.request
    trust = ssl.create_default_context(cadata=base64.b64decode(join["caCert"]).decode())
    node = {{"apiVersion": "v1", "kind": "Node",
             "metadata": {{"name": hostname, "labels": {{**join["labels"], "type": "kwok"}},
                          "annotations": {{"kwok.x-k8s.io/node": "fake"}}}},
             "spec": {{"providerID": provider_id, "taints": join["taints"] or None}},
             "status": {{"capacity": {{"cpu": "2", "memory": "4Gi", "pods": "110"}},
                        "allocatable": {{"cpu": "2", "memory": "4Gi", "pods": "110"}}}}}}
    request = urllib.request.Request(
        join["server"].rstrip("/") + "/api/v1/nodes", data=json.dumps(node).encode(),
        headers={{"Authorization": "Bearer " + join["token"],
                  "Content-Type": "application/json"}}, method="POST")
    try:
        urllib.request.urlopen(request, context=trust, timeout=20).close()
    except urllib.error.HTTPError as error:
        if error.code != 409:  # asked again: joined already
            raise


if command == "create":
    # The node command a real machine would run, kept for the tests to read.
    (STATE / (message["machine"]["name"] + ".join")).write_text(message["join"]["command"])
    # The machine exists before it boots, as a cloud's instance does: a test that sees its node
    # must find the machine too. Booting happens once, even if create is asked again.
    if not machine.exists():
        machine.write_text(json.dumps({{"phase": "Running", "providerId": "fake://" +
                                        message["machine"]["name"], "addresses": ["10.0.0.7"]}}))
    if config.get("register") and not joined.exists():
        register(message["join"], message["machine"]["hostname"],
                 "fake://" + message["machine"]["name"])
        joined.touch()
    print(json.dumps({{"exists": True, **json.loads(machine.read_text())}}))
elif command == "state":
    if machine.exists():
        print(json.dumps({{"exists": True, **json.loads(machine.read_text())}}))
    else:
        print(json.dumps({{"exists": False}}))
elif command == "remove":
    machine.unlink(missing_ok=True)
    joined.unlink(missing_ok=True)
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
