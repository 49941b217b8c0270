"""Building kubeconfig documents."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import yaml


@dataclass(frozen=True)
class Credentials:
    """How a kubeconfig user authenticates: a bearer token or a client certificate (PEM)."""

    token: str | None = None
    client_cert: bytes | None = None
    client_key: bytes | None = None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def build(
    name: str, server: str, ca_cert: bytes | None, credentials: Credentials
) -> dict[str, Any]:
    """One cluster, one user and one context, all called `name`, with the context current."""
    cluster: dict[str, Any] = {"server": server}
    if ca_cert is not None:
        cluster["certificate-authority-data"] = _b64(ca_cert)
    user: dict[str, Any] = {}
    if credentials.token is not None:
        user["token"] = credentials.token
    if credentials.client_cert is not None and credentials.client_key is not None:
        user["client-certificate-data"] = _b64(credentials.client_cert)
        user["client-key-data"] = _b64(credentials.client_key)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def dump(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)
