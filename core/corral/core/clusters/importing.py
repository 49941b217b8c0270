"""Importing a cluster: read the user's kubeconfig, use it once to give corral its own
credential in the cluster (`corral.core.kube.agent`), and forget it.

corral's credential is the token of the service account `svc-system/corral`, bound to
`cluster-admin` (corral manages namespaces, RBAC, nodes and workloads, and impersonates users
in its proxy). The user's kubeconfig is never stored.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

import yaml

from corral.core.clusters.credential import Credential
from corral.core.errors import Invalid

AGENT_NAMESPACE = "svc-system"
AGENT_NAME = "corral"
# Where a kubeconfig is given in `/v3` (a body's top-level `kubeConfig` is accepted too).
KUBECONFIG_FIELD = "importedConfig.kubeConfig"
KUBECONFIG_MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
# What may go into an HTTP header or a URL: visible ASCII, no spaces, tabs or line breaks.
VISIBLE = re.compile(r"[\x21-\x7e]+")
# Fields that point at files or programs on the user's machine, which corral cannot read.
FILE_REFERENCES = {
    "certificate-authority": "the CA",
    "client-certificate": "the client certificate",
    "client-key": "the client key",
    "tokenFile": "the token",
    "exec": "credentials",
    "auth-provider": "credentials",
}


class ImportFailed(Invalid):
    """The kubeconfig cannot be used, or the cluster cannot be set up with it: the request's
    kubeconfig is at fault, even when `code` says that what it points at did not answer."""

    def __init__(self, message: str, code: str = "InvalidFormat") -> None:
        super().__init__(message, KUBECONFIG_FIELD, code)


def parse_kubeconfig(encoded: Any) -> Credential:
    """The credential of a base64 kubeconfig's current context; only embedded credentials.
    Raises ImportFailed for anything else, whatever the input."""
    config = _load(encoded)
    contexts = _named(config, "contexts", "context")
    current = config.get("current-context") or (next(iter(contexts)) if len(contexts) == 1 else "")
    if not isinstance(current, str) or current not in contexts:
        raise ImportFailed("kubeConfig has no current-context to import")
    context = contexts[current]
    cluster = _named(config, "clusters", "cluster").get(_text(context.get("cluster")))
    user = _named(config, "users", "user").get(_text(context.get("user")))
    if cluster is None or user is None:
        raise ImportFailed(f"context {current!r} names a cluster or user that is not defined")
    return _credential(cluster, user)


def _load(encoded: Any) -> dict[str, Any]:
    if not isinstance(encoded, str) or not encoded.strip():
        raise ImportFailed("kubeConfig must be a base64-encoded kubeconfig", "MissingRequired")
    if len(encoded) > KUBECONFIG_MAX_BYTES:
        raise ImportFailed("kubeConfig is larger than 256 KiB")
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ImportFailed("kubeConfig is not valid base64") from None
    try:
        config = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise ImportFailed(f"kubeConfig is not YAML: {exc}") from None
    if not isinstance(config, dict) or config.get("kind", "Config") != "Config":
        raise ImportFailed("kubeConfig is not a kubeconfig (kind: Config)")
    return config


class _Loader(yaml.SafeLoader):
    """Safe YAML that stops at a nesting no kubeconfig has, before the nesting costs time or
    the stack (the C loader would crash the process on it)."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ImportFailed(f"kubeConfig is nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _credential(cluster: dict[str, Any], user: dict[str, Any]) -> Credential:
    server = _server(cluster.get("server"))
    if cluster.get("insecure-skip-tls-verify"):
        raise ImportFailed("insecure-skip-tls-verify is not accepted: include the cluster's CA")
    for reference, what in FILE_REFERENCES.items():
        if reference in cluster or reference in user:
            raise ImportFailed(f"kubeConfig must embed {what}; files and plugins cannot be read")
    try:
        ca = _b64(cluster.get("certificate-authority-data"))
        cert, key = _b64(user.get("client-certificate-data")), _b64(user.get("client-key-data"))
    except (binascii.Error, ValueError):
        raise ImportFailed("a *-data field of kubeConfig is not valid base64") from None
    token = user.get("token")
    if not token and not (cert and key):
        raise ImportFailed("kubeConfig's user has neither a token nor a client certificate")
    if token and not (isinstance(token, str) and VISIBLE.fullmatch(token)):
        raise ImportFailed("kubeConfig's token must be visible ASCII, without spaces or breaks")
    return Credential(server, ca_cert=ca, token=token or None, client_cert=cert, client_key=key)


def _server(value: Any) -> str:
    """The API server's URL: https, a host, a valid port, nothing a header or a log line
    could be smuggled into."""
    if not isinstance(value, str) or not VISIBLE.fullmatch(value):
        raise ImportFailed("the cluster's server must be an https:// URL")
    try:
        url = urlsplit(value)
        port = url.port
    except ValueError as exc:
        raise ImportFailed(f"the cluster's server is not a valid URL: {exc}") from None
    if url.scheme != "https" or not url.hostname:
        raise ImportFailed("the cluster's server must be an https:// URL")
    if port == 0 or url.username is not None or url.query or url.fragment:
        raise ImportFailed("the cluster's server must be https://host[:port][/path]")
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _named(config: dict[str, Any], section: str, field: str) -> dict[str, dict[str, Any]]:
    entries = config.get(section) or []
    if not isinstance(entries, list):
        raise ImportFailed(f"kubeConfig's {section} must be a list")
    named = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get(field), dict):
            named[str(entry.get("name", ""))] = entry[field]
    return named


def _b64(value: Any) -> bytes | None:
    if not value:
        return None
    if not isinstance(value, str):
        raise ValueError("not text")
    return base64.b64decode(value, validate=True)


def not_kubernetes(credential: Credential, why: str) -> ImportFailed:
    return ImportFailed(
        f"the server at {credential.server} does not answer as a Kubernetes API server: {why}",
        "ClusterUnavailable",
    )
