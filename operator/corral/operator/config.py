"""Operator configuration, read once from the environment."""

from __future__ import annotations

import os
import re
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from corral.core.clusters import shards
from corral.core.drivers import source
from corral.core.registration.command import Corral

# kopf peering keeps the replica of highest priority active and pauses the others; replicas of
# equal priority all pause, so two replicas started from one pod template with a fixed priority
# would both stand still. `auto` gives each process its own random priority instead: which
# replica wins does not matter, only that one does (a clash is a 1 in 2**31 chance).
AUTO_PRIORITY = "auto"
PRIORITY_RANGE = 2**31
# Where the operator keeps files of its own (the driver cache): the chart mounts an emptyDir
# here, the root filesystem being read-only. Losing it costs a download, nothing more.
DEFAULT_DATA_DIR = "/var/lib/corral"
# A replica's identity names its member Lease (`corral-operator-member-<identity>`): a DNS
# subdomain, short enough for the prefix.
IDENTITY = re.compile(r"[a-z0-9]([-a-z0-9.]{0,198}[a-z0-9])?")


# New hosted control planes a replica starts at once (controlplane/starts.py): two measured
# best on a 2-core node, one start to a core (docs/provisioning.md, "Ten at once").
DEFAULT_HOSTED_STARTS = 2
MAX_HOSTED_STARTS = 64


@dataclass(frozen=True)
class HostedGrant:
    """Under the Helm chart the operator may write Secrets, workloads and volumes only where
    it binds itself this ClusterRole: in the namespace of each cluster whose control plane it
    hosts. Without it (the local environment's admin credential) nothing is bound."""

    role: str
    namespace: str  # the operator's service account
    service_account: str


@dataclass(frozen=True)
class OperatorConfig:
    liveness_endpoint: str
    peering_name: str
    priority: int
    data_dir: Path
    # Which replica this is among those sharing the clusters, and into how many shards they
    # are cut (the same on every replica).
    identity: str
    shards: int
    # How many new hosted control planes this replica starts at once (controlplane/starts.py).
    hosted_starts: int = DEFAULT_HOSTED_STARTS
    hosted_grant: HostedGrant | None = None
    # The directory node drivers' file urls may name files below; None (the chart's) refuses
    # them: the operator would read, cache and run any file it can open.
    driver_files: str | None = None
    # Where machines reach the API server, for the node command a pool's machine runs; None
    # (CORRAL_EXTERNAL_URL unset) gives drivers no command.
    corral: Corral | None = None

    @property
    def driver_cache(self) -> Path:
        return self.data_dir / "drivers"

    @classmethod
    def from_env(cls) -> OperatorConfig:
        return cls(
            liveness_endpoint=os.environ.get(
                "CORRAL_OPERATOR_LIVENESS", "http://0.0.0.0:8080/healthz"
            ),
            peering_name=os.environ.get("CORRAL_OPERATOR_PEERING", "corral"),
            priority=parse_priority(os.environ.get("CORRAL_OPERATOR_PRIORITY", "0")),
            data_dir=Path(os.environ.get("CORRAL_OPERATOR_DATA_DIR") or DEFAULT_DATA_DIR),
            identity=parse_identity(os.environ.get("CORRAL_OPERATOR_IDENTITY")),
            shards=parse_shards(os.environ.get("CORRAL_OPERATOR_SHARDS")),
            hosted_starts=parse_starts(os.environ.get("CORRAL_HOSTED_CONTROL_PLANE_STARTS")),
            hosted_grant=hosted_grant(),
            driver_files=driver_files(os.environ.get(source.FILE_DIR_ENV)),
            corral=corral(),
        )


def driver_files(text: str | None) -> str | None:
    """An absolute directory, or None (unset or empty)."""
    if not text:
        return None
    if not text.startswith("/"):
        raise ValueError(f"{source.FILE_DIR_ENV} must be an absolute path, not {text!r}")
    return text


def hosted_grant() -> HostedGrant | None:
    role = os.environ.get("CORRAL_HOSTED_CONTROL_PLANE_ROLE", "")
    if not role:
        return None
    return HostedGrant(
        role=role,
        namespace=os.environ["CORRAL_OPERATOR_NAMESPACE"],
        service_account=os.environ["CORRAL_OPERATOR_SERVICE_ACCOUNT"],
    )


def parse_priority(text: str) -> int:
    """An integer priority, or `auto`: a random one in [1, 2**31)."""
    value = text.strip()
    if value.lower() == AUTO_PRIORITY:
        return 1 + secrets.randbelow(PRIORITY_RANGE - 1)
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"CORRAL_OPERATOR_PRIORITY must be an integer or {AUTO_PRIORITY}, not {text!r}"
        ) from None


def parse_identity(text: str | None) -> str:
    """The identity given (the chart gives the pod's name), or one of this process's own:
    two processes on one host must not pass for one replica."""
    if not text:
        host = re.sub(r"[^a-z0-9.-]+", "-", socket.gethostname().lower()).strip("-.")[:160]
        return f"{host or 'operator'}-{os.getpid()}"
    if not IDENTITY.fullmatch(text):
        raise ValueError(
            "CORRAL_OPERATOR_IDENTITY must be lower-case letters, digits, '-' and '.', "
            f"at most 200, starting and ending with a letter or digit, not {text!r}"
        )
    return text


def parse_shards(text: str | None) -> int:
    """The number of shards, 1 to MAX_SHARDS; DEFAULT_SHARDS unset."""
    if not text:
        return shards.DEFAULT_SHARDS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= shards.MAX_SHARDS:
        raise ValueError(
            f"CORRAL_OPERATOR_SHARDS must be an integer from 1 to {shards.MAX_SHARDS}, not {text!r}"
        )
    return value


def corral() -> Corral | None:
    """The API server as machines reach it: the same CORRAL_EXTERNAL_URL, CORRAL_CA_FILE and
    CORRAL_TLS_CERT_FILE (the certificate only, never its key) the API server is given."""
    url = os.environ.get("CORRAL_EXTERNAL_URL")
    if not url:
        return None
    ca, cert = os.environ.get("CORRAL_CA_FILE"), os.environ.get("CORRAL_TLS_CERT_FILE")
    return Corral(
        url.rstrip("/"),
        Path(ca).read_bytes() if ca else None,
        Path(cert).read_bytes() if cert else None,
    )


def parse_starts(text: str | None) -> int:
    """How many new control planes start at once, 1 to MAX_HOSTED_STARTS; the default unset."""
    if not text:
        return DEFAULT_HOSTED_STARTS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_HOSTED_STARTS:
        raise ValueError(
            "CORRAL_HOSTED_CONTROL_PLANE_STARTS must be an integer from 1 to "
            f"{MAX_HOSTED_STARTS}, not {text!r}"
        )
    return value
