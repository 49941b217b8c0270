"""API server configuration, read once from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class ConfigError(ValueError):
    """The environment does not describe a server that can start."""


@dataclass(frozen=True)
class ApiServerConfig:
    host: str
    port: int
    tls_cert: Path
    tls_key: Path
    ca_file: Path | None

    @classmethod
    def from_env(cls) -> ApiServerConfig:
        host, _, port = os.environ.get("CORRAL_LISTEN", "0.0.0.0:8443").rpartition(":")
        cert, key = os.environ.get("CORRAL_TLS_CERT_FILE"), os.environ.get("CORRAL_TLS_KEY_FILE")
        if not cert or not key:
            # HTTPS only: tokens travel in every request.
            raise ConfigError("CORRAL_TLS_CERT_FILE and CORRAL_TLS_KEY_FILE are required")
        if not port.isdigit():
            raise ConfigError(f"CORRAL_LISTEN must be host:port, not {host}:{port}")
        ca = os.environ.get("CORRAL_CA_FILE")
        return cls(
            host=host or "0.0.0.0",  # noqa: S104
            port=int(port),
            tls_cert=Path(cert),
            tls_key=Path(key),
            ca_file=Path(ca) if ca else None,
        )
