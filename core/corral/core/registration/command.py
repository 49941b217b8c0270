"""The node command (docs/design/real-machines.md, "The node command"): the one shell line a
machine's root runs to join a cluster.

    curl -fsSL --pinnedpubkey sha256//<key> -k https://corral/v3/connect/install.sh | \
      sh -s - --server https://corral --token <token> --ca-checksum <sha256> --worker

The installer is fetched without a CA (`-k`: the machine has none yet) but pinned to corral's
serving key, so nobody in between can hand the machine another script; the script then checks
the CA at `/cacerts` against `--ca-checksum` and uses it for everything after. The insecure
command drops the pin, for a serving key the user replaces (Rancher's `insecureNodeCommand`).
"""

from __future__ import annotations

import base64
import hashlib
import shlex
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

INSTALL_PATH = "/v3/connect/install.sh"
CA_PATH = "/cacerts"


def pin(serving_cert: bytes) -> str:
    """curl's `--pinnedpubkey` of a PEM certificate: `sha256//` and the base64 sha256 of its
    SubjectPublicKeyInfo."""
    key = x509.load_pem_x509_certificate(serving_cert).public_key()
    spki = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return "sha256//" + base64.b64encode(hashlib.sha256(spki).digest()).decode()


def ca_checksum(ca: bytes) -> str:
    """The sha256 (hex) of the CA exactly as `/cacerts` serves it."""
    return hashlib.sha256(ca).hexdigest()


def node_command(
    server: str, token: str, ca: bytes | None, serving_cert: bytes | None, pinned: bool = True
) -> str:
    """The command that joins a machine as a worker. Without a CA of its own corral's
    certificate is one the machine already trusts: no checksum, no `-k`, nothing to pin."""
    fetch = ["curl", "-fsSL"]
    if ca is not None:
        if pinned and serving_cert is not None:
            fetch += ["--pinnedpubkey", pin(serving_cert)]
        fetch.append("-k")
    fetch.append(server + INSTALL_PATH)
    install = ["sh", "-s", "-", "--server", server, "--token", token]
    if ca is not None:
        install += ["--ca-checksum", ca_checksum(ca)]
    install.append("--worker")
    return f"{shlex.join(fetch)} | {shlex.join(install)}"


@dataclass(frozen=True)
class Corral:
    """Where machines reach corral, and what of its TLS a node command names."""

    url: str  # CORRAL_EXTERNAL_URL
    ca: bytes | None = None  # what /cacerts serves; None when clients trust it already
    serving_cert: bytes | None = None  # whose key the command pins

    def node_command(self, token: str, pinned: bool = True) -> str:
        return node_command(self.url, token, self.ca, self.serving_cert, pinned)
