"""API server configuration, read once from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from yarl import URL

from corral.core.drivers import source

NODE_ASSET_DIR_ENV = "CORRAL_NODE_ASSET_DIR"
# Listen addresses that say "every interface", not where clients find the server.
_ANY_HOST = {"", "0.0.0.0", "::", "[::]"}  # noqa: S104


class ConfigError(ValueError):
    """The environment does not describe a server that can start."""


# What `make image` tags corral's image as, without its content hash.
DEFAULT_AGENT_IMAGE = f"localhost/corral:{metadata.version('corral')}"


@dataclass(frozen=True)
class ApiServerConfig:
    host: str
    port: int
    tls_cert: Path
    tls_key: Path
    ca_file: Path | None
    # Where clients reach this server: links and kubeconfigs point here, never at whatever a
    # request's Host header claims.
    external_url: str
    # The directory node drivers' file urls may name files below; None refuses them.
    driver_files: str | None = None
    # The files GET /assets/<file> serves; None serves nothing there.
    node_assets: Path | None = None
    # Where the tunnel proxy listens, and the host:port other corral processes reach it at
    # (docs/design/cluster-agent.md, section 6); empty: the address it listens on.
    tunnel_listen: tuple[str, int] = ("127.0.0.1", 0)
    tunnel_advertise: str = ""
    # The image the import manifest runs the cluster agent from: corral's own.
    agent_image: str = DEFAULT_AGENT_IMAGE

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
        default_url = f"https://{'localhost' if host in _ANY_HOST else host}:{port}"
        return cls(
            host=host or "0.0.0.0",  # noqa: S104
            port=int(port),
            tls_cert=Path(cert),
            tls_key=Path(key),
            ca_file=Path(ca) if ca else None,
            external_url=external_url(os.environ.get("CORRAL_EXTERNAL_URL") or default_url),
            driver_files=driver_files(os.environ.get(source.FILE_DIR_ENV)),
            node_assets=node_assets(os.environ.get(NODE_ASSET_DIR_ENV)),
            tunnel_listen=address(os.environ.get("CORRAL_TUNNEL_LISTEN", "127.0.0.1:0")),
            tunnel_advertise=os.environ.get("CORRAL_TUNNEL_ADVERTISE", ""),
            agent_image=os.environ.get("CORRAL_AGENT_IMAGE") or DEFAULT_AGENT_IMAGE,
        )


def address(text: str) -> tuple[str, int]:
    """`host:port` (port 0: any free one)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"CORRAL_TUNNEL_LISTEN must be host:port, not {text!r}")
    return host, int(port)


def driver_files(text: str | None) -> str | None:
    """An absolute directory, or None (unset or empty: file urls refused)."""
    if not text:
        return None
    if not text.startswith("/"):
        raise ConfigError(f"{source.FILE_DIR_ENV} must be an absolute path, not {text!r}")
    return text


def node_assets(text: str | None) -> Path | None:
    """An absolute directory, or None (unset or empty: /assets serves nothing)."""
    if not text:
        return None
    if not text.startswith("/"):
        raise ConfigError(f"{NODE_ASSET_DIR_ENV} must be an absolute path, not {text!r}")
    return Path(text)


def external_url(text: str) -> str:
    """`scheme://host[:port]`, checked: it goes into every link and kubeconfig."""
    try:
        url = URL(text)
    except ValueError:
        url = URL()
    plain = url.path in ("", "/") and not url.query_string and not url.fragment
    if url.scheme not in ("https", "http") or not url.host or not plain:
        raise ConfigError(f"CORRAL_EXTERNAL_URL must be https://host[:port], not {text!r}")
    return str(url.origin())
