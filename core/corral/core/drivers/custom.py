"""Existing machines added over SSH (spec 2.4 `customConfig`, Rancher's custom nodes): what a
client may ask for, and what the operator runs on the machine.

`customConfig` names the machine (`address`, an IP or a DNS name; `internalAddress`, an IP),
the SSH `user` (root unless said) and `sshKey`, a private key without a passphrase. The key is
write-only: it is checked here, kept in a Secret, and never shown again. Port 22, as Rancher
(which has no port field). What is refused here is refused before anything is stored.

The operator connects, checks that containerd is there and runs the cluster's node command as
root (through `sudo -n` for another user); the commands are built here so they can be read and
tested without a machine.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections import deque
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from corral.core.api import addresses
from corral.core.api.ids import is_dns_subdomain
from corral.core.errors import Invalid

DEFAULT_USER = "root"
SSH_PORT = 22
# A 16384-bit RSA key in PEM is about 12.5 KiB; nothing a user has is larger.
MAX_KEY_CHARS = 16 * 1024
MAX_ADDRESS = 253
# A node name is a DNS subdomain; a machine's hostname is at most 64 characters (HOST_NAME_MAX).
MAX_HOSTNAME = 63
# POSIX's portable user names, as useradd takes them.
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}", re.ASCII)
_FIELDS = frozenset({"address", "internalAddress", "user", "sshKey"})
FIELD = "customConfig"

CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
UNINSTALL = "/usr/local/bin/corral-node-uninstall.sh"
# What a condition keeps of a command's output: its last lines, each cut to a line's width.
TAIL_LINES = 20
TAIL_LINE_CHARS = 200


@dataclass(frozen=True)
class CustomConfig:
    address: str
    internal_address: str = ""
    user: str = DEFAULT_USER

    def stored(self, key_secret: str) -> dict[str, str]:
        """The Node CR's `spec.customConfig`: the Secret holding the key, never the key."""
        stored = {"address": self.address, "user": self.user, "sshKeySecretName": key_secret}
        if self.internal_address:
            stored["internalAddress"] = self.internal_address
        return stored

    @classmethod
    def of(cls, stored: dict[str, Any]) -> CustomConfig:
        return cls(
            str(stored.get("address", "")),
            str(stored.get("internalAddress", "")),
            str(stored.get("user") or DEFAULT_USER),
        )


def shown(stored: dict[str, Any] | None) -> dict[str, str] | None:
    """What a response shows of a stored `customConfig`: never the key, nor where it is."""
    if not stored:
        return None
    return {k: str(stored[k]) for k in ("address", "internalAddress", "user") if k in stored}


def parse(given: Any) -> tuple[CustomConfig, str]:
    """A body's `customConfig` checked, and its key (checked by `check_private_key`, which is
    slow enough to run off the event loop)."""
    if not isinstance(given, dict):
        raise Invalid(f"{FIELD} must be an object", FIELD)
    unknown = sorted(set(given) - _FIELDS)
    if unknown:
        raise Invalid(f"{FIELD}.{unknown[0]} is not a field of {FIELD}", f"{FIELD}.{unknown[0]}")
    address = _text(given, "address", MAX_ADDRESS, required=True)
    check_address(address, f"{FIELD}.address")
    internal = _text(given, "internalAddress", 45)
    if internal:
        check_ip(internal, f"{FIELD}.internalAddress")
    user = _text(given, "user", 32) or DEFAULT_USER
    if not _USER.fullmatch(user):
        raise Invalid(
            f"{FIELD}.user must be a user name: lower-case letters, digits, '_' or '-', "
            "starting with a letter or '_', at most 32 characters",
            f"{FIELD}.user",
        )
    key = _text(given, "sshKey", MAX_KEY_CHARS, required=True)
    return CustomConfig(address, internal, user), key


def check_private_key(key: str) -> None:
    """The key is a private key corral can sign with: OpenSSH's format or PEM (PKCS#1,
    PKCS#8, SEC1), not encrypted (there is nothing to give a passphrase with)."""
    data = key.strip().encode()
    try:
        if data.startswith(b"-----BEGIN OPENSSH PRIVATE KEY-----"):
            serialization.load_ssh_private_key(data, password=None)
        else:
            serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise Invalid(
            f"{FIELD}.sshKey is encrypted: give the key without a passphrase", f"{FIELD}.sshKey"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise Invalid(
            f"{FIELD}.sshKey must be a private key in OpenSSH or PEM format", f"{FIELD}.sshKey"
        ) from None


def check_address(address: str, field: str) -> None:
    """An IP address or a DNS name, neither this host's own nor a cloud's metadata service."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    if ip is not None:
        check_ip(address, field)
        return
    name = address.rstrip(".").lower()
    if not is_dns_subdomain(name) or name.replace(".", "").isdigit():
        raise Invalid(f"{field} must be an IP address or a DNS name", field)
    if name == "localhost" or name.endswith(".localhost") or addresses.is_metadata_host(name):
        raise Invalid(f"{field} {address} is not a machine corral may connect to", field)


def check_ip(text: str, field: str) -> None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        raise Invalid(f"{field} must be an IP address", field) from None
    if (
        ip.is_loopback
        or ip.is_unspecified
        or ip.is_multicast
        or addresses.is_metadata_host(str(ip))
    ):
        raise Invalid(f"{field} {text} is not a machine's address", field)


def hostname(body: dict[str, Any]) -> str:
    """The node's name: `requestedHostname` (Rancher's `hostnameOverride` is the same)."""
    name = _text(body, "requestedHostname", MAX_HOSTNAME, within="") or _text(
        body, "hostnameOverride", MAX_HOSTNAME, within=""
    )
    if not name:
        raise Invalid("requestedHostname is required", "requestedHostname", "MissingRequired")
    if not is_dns_subdomain(name) or len(name) > MAX_HOSTNAME:
        raise Invalid(
            f"requestedHostname must be a DNS name of at most {MAX_HOSTNAME} characters: "
            "lower-case letters, digits, '-' and '.'",
            "requestedHostname",
        )
    return name


def _text(
    body: dict[str, Any], field: str, max_length: int, required: bool = False, within: str = FIELD
) -> str:
    value = body.get(field)
    name = f"{within}.{field}" if within else field
    if value is None or value == "":
        if required:
            raise Invalid(f"{name} is required", name, "MissingRequired")
        return ""
    if not isinstance(value, str) or len(value) > max_length:
        raise Invalid(f"{name} must be text of at most {max_length} characters", name)
    return value


# -- on the machine -------------------------------------------------------------------------


def as_root(command: str, user: str) -> str:
    """`command` run by root: as it is for root, through `sudo -n` (never a password prompt,
    which would wait for the command's timeout) for anyone else."""
    if user == "root":
        return command
    return shlex.join(["sudo", "-n", "sh", "-c", command])


def containerd_check() -> str:
    """Succeeds where containerd answers on its socket and `ctr` is there to import images."""
    return f"test -S {CONTAINERD_SOCKET} && command -v ctr >/dev/null"


def install(node_command: str, name: str, config: CustomConfig) -> str:
    """The node command with the machine's own name and addresses added to the installer's.
    A node's address is an IP: for a machine reached by a DNS name, the installer finds it."""
    extra = ["--node-name", name]
    if _is_ip(config.address):
        extra += ["--address", config.address]
    if config.internal_address:
        extra += ["--internal-address", config.internal_address]
    return f"{node_command} {shlex.join(extra)}"


def installed_check() -> str:
    """Succeeds where the installer finished: it writes its uninstall last. The node command
    pipes a download into `sh`, and a POSIX shell has no pipefail: a download that fails
    leaves `sh` an empty script, which succeeds."""
    return f"test -x {UNINSTALL}"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def uninstall() -> str:
    """The installer's uninstall, when it left one: what it installed goes, nothing else."""
    return f"if [ -x {UNINSTALL} ]; then {UNINSTALL}; fi"


class Tail:
    """The last lines of a command's output, however much it writes: a condition says how it
    ended, and a process that prints without end costs a bounded amount of memory."""

    def __init__(self, lines: int = TAIL_LINES, width: int = TAIL_LINE_CHARS) -> None:
        self._lines: deque[str] = deque(maxlen=lines)
        self._partial = ""
        self._width = width

    def feed(self, chunk: str) -> None:
        *complete, partial = (self._partial + chunk).split("\n")
        for line in complete[-(self._lines.maxlen or 1) :]:
            self._lines.append(self._cut(line))
        # An unfinished line keeps enough of both ends to be cut as a whole line would be.
        if len(partial) > 2 * self._width:
            partial = partial[: self._width] + partial[-self._width :]
        self._partial = partial

    def _cut(self, line: str) -> str:
        """A long line keeps its start and its end: where a command says what failed, often
        after a long URL or path."""
        if len(line) <= self._width:
            return line
        head = (self._width - 1) // 2
        return f"{line[:head]}…{line[len(line) - (self._width - 1 - head) :]}"

    def text(self) -> str:
        partial = self._cut(self._partial)
        lines = [*self._lines, partial] if partial else list(self._lines)
        lines = lines[-(self._lines.maxlen or 1) :]
        return "\n".join(line.rstrip() for line in lines if line.strip())
