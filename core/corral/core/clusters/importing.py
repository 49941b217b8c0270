"""Importing a cluster: read the user's kubeconfig, use it once to give corral its own
credential in the cluster, and forget it.

corral's credential is the token of the service account `svc-system/corral`, bound to
`cluster-admin` (corral manages namespaces, RBAC, nodes and workloads, and impersonates users
in its proxy). The user's kubeconfig is never stored.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml
from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.core_v1 import Namespace, Secret, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from corral.core.clusters.credential import Credential

AGENT_NAMESPACE = "svc-system"
AGENT_NAME = "corral"
AGENT_TOKEN_SECRET = "corral-token"
TOKEN_TIMEOUT = 30.0
KUBECONFIG_MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
# A real /version answer is a few hundred bytes; a server answering more is not read whole.
VERSION_MAX_BYTES = 64 * 1024
# What may go into an HTTP header or a URL: visible ASCII, no spaces, tabs or line breaks.
_VISIBLE = re.compile(r"[\x21-\x7e]+")
_UID = re.compile(r"[0-9A-Za-z-]{1,64}")
# Fields that point at files or programs on the user's machine, which corral cannot read.
FILE_REFERENCES = {
    "certificate-authority": "the CA",
    "client-certificate": "the client certificate",
    "client-key": "the client key",
    "tokenFile": "the token",
    "exec": "credentials",
    "auth-provider": "credentials",
}


class ImportFailed(ValueError):
    """The kubeconfig cannot be used, or the cluster cannot be set up with it."""

    def __init__(self, message: str, code: str = "InvalidFormat") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


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
    if token and not (isinstance(token, str) and _VISIBLE.fullmatch(token)):
        raise ImportFailed("kubeConfig's token must be visible ASCII, without spaces or breaks")
    return Credential(server, ca_cert=ca, token=token or None, client_cert=cert, client_key=key)


def _server(value: Any) -> str:
    """The API server's URL: https, a host, a valid port, nothing a header or a log line
    could be smuggled into."""
    if not isinstance(value, str) or not _VISIBLE.fullmatch(value):
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


async def version(credential: Credential, seconds: float = 10.0) -> dict[str, Any]:
    """The cluster's /version; raises ImportFailed when the cluster cannot be reached or does
    not answer as Kubernetes does."""
    session = _session(credential, seconds)
    try:
        async with session, session.get("version", allow_redirects=False) as response:
            status = response.status
            body = await _read_at_most(response, VERSION_MAX_BYTES)
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        reason = str(exc) or type(exc).__name__
        raise ImportFailed(
            f"cannot reach the cluster at {credential.server}: {reason}", "ClusterUnavailable"
        ) from None
    if status in (401, 403):
        raise ImportFailed(
            f"the cluster at {credential.server} refused the credentials (HTTP {status})",
            "Unauthorized",
        )
    if status >= 400:
        raise ImportFailed(
            f"the cluster at {credential.server} answered HTTP {status}", "ClusterUnavailable"
        )
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("gitVersion"), str):
        raise not_kubernetes(credential, "its /version is not a Kubernetes version")
    return answer


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    body = b""
    while len(body) <= limit and (chunk := await response.content.read(limit + 1 - len(body))):
        body += chunk
    return body


def _session(credential: Credential, seconds: float) -> aiohttp.ClientSession:
    try:
        return credential.session(seconds)
    except (ssl.SSLError, ValueError) as exc:
        raise ImportFailed(f"kubeConfig's certificates cannot be used: {exc}") from None


def not_kubernetes(credential: Credential, why: str) -> ImportFailed:
    return ImportFailed(
        f"the server at {credential.server} does not answer as a Kubernetes API server: {why}",
        "ClusterUnavailable",
    )


async def identify(user: Credential) -> str:
    """What makes the cluster itself known, whichever URL or credential reaches it: the uid
    of its `kube-system` namespace, which lives as long as the cluster."""
    await version(user)
    client = user.client()
    try:
        namespace = await client.get(Namespace, "kube-system")
    except ApiError as exc:
        if exc.status.code in (401, 403):
            raise ImportFailed(
                "the kubeconfig's user may not read the namespace kube-system", "PermissionDenied"
            ) from None
        raise not_kubernetes(user, f"kube-system: {exc.status.message}") from None
    except Exception as exc:  # noqa: BLE001 - whatever a server that is not Kubernetes does
        raise not_kubernetes(user, type(exc).__name__) from None
    finally:
        await client.close()
    uid = namespace.metadata.uid if namespace.metadata else None
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise not_kubernetes(user, "its kube-system namespace has no uid")
    return uid


@dataclass(frozen=True)
class Imported:
    credential: Credential
    version: dict[str, Any]


async def install_agent(user: Credential) -> Imported:
    """Create corral's service account, binding and token in the cluster with the user's
    credential (checked by `identify` first), wait for the token, and check that it works."""
    client = user.client()
    try:
        for obj in (
            Namespace(metadata=ObjectMeta(name=AGENT_NAMESPACE)),
            ServiceAccount(metadata=ObjectMeta(name=AGENT_NAME, namespace=AGENT_NAMESPACE)),
            ClusterRoleBinding(
                metadata=ObjectMeta(name=AGENT_NAME),
                roleRef=RoleRef(
                    apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"
                ),
                subjects=[
                    Subject(kind="ServiceAccount", name=AGENT_NAME, namespace=AGENT_NAMESPACE)
                ],
            ),
            Secret(
                metadata=ObjectMeta(
                    name=AGENT_TOKEN_SECRET,
                    namespace=AGENT_NAMESPACE,
                    annotations={"kubernetes.io/service-account.name": AGENT_NAME},
                ),
                type="kubernetes.io/service-account-token",
            ),
        ):
            await client.apply(obj, force=True)
        token, ca = await _await_token(client)
    except ApiError as exc:
        raise ImportFailed(
            f"the kubeconfig's user may not set up corral in the cluster: {exc.status.message}",
            "PermissionDenied",
        ) from None
    except ImportFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a server that is not Kubernetes does
        raise not_kubernetes(user, type(exc).__name__) from None
    finally:
        await client.close()
    agent = Credential(server=user.server, ca_cert=user.ca_cert or ca, token=token)
    return Imported(agent, await version(agent))


async def _await_token(client: AsyncClient) -> tuple[str, bytes | None]:
    """kube-controller-manager fills in the token of a service-account-token Secret."""
    deadline = time.monotonic() + TOKEN_TIMEOUT
    while True:
        secret = await client.get(Secret, AGENT_TOKEN_SECRET, namespace=AGENT_NAMESPACE)
        data = secret.data or {}
        if data.get("token"):
            ca = base64.b64decode(data["ca.crt"]) if data.get("ca.crt") else None
            token = base64.b64decode(data["token"]).decode()
            if not _VISIBLE.fullmatch(token):
                raise ValueError("the service account token is not a bearer token")
            return token, ca
        if time.monotonic() > deadline:
            message = "the cluster issued no service account token (is its controller running?)"
            raise ImportFailed(message, "ClusterUnavailable")
        await asyncio.sleep(0.2)
