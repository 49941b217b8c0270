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
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

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
    """The credential of a base64 kubeconfig's current context; only embedded credentials."""
    if not isinstance(encoded, str) or not encoded.strip():
        raise ImportFailed("kubeConfig must be a base64-encoded kubeconfig", "MissingRequired")
    if len(encoded) > KUBECONFIG_MAX_BYTES:
        raise ImportFailed("kubeConfig is larger than 256 KiB")
    try:
        text = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ImportFailed("kubeConfig is not valid base64") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ImportFailed(f"kubeConfig is not YAML: {exc}") from None
    if not isinstance(config, dict) or config.get("kind", "Config") != "Config":
        raise ImportFailed("kubeConfig is not a kubeconfig (kind: Config)")

    contexts = _named(config, "contexts", "context")
    current = config.get("current-context") or (next(iter(contexts)) if len(contexts) == 1 else "")
    if current not in contexts:
        raise ImportFailed("kubeConfig has no current-context to import")
    context = contexts[current]
    cluster = _named(config, "clusters", "cluster").get(context.get("cluster", ""))
    user = _named(config, "users", "user").get(context.get("user", ""))
    if cluster is None or user is None:
        raise ImportFailed(f"context {current!r} names a cluster or user that is not defined")

    server = cluster.get("server", "")
    if urlparse(server).scheme != "https" or not urlparse(server).hostname:
        raise ImportFailed("the cluster's server must be an https:// URL")
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
    return Credential(server=server, ca_cert=ca, token=token, client_cert=cert, client_key=key)


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
    return base64.b64decode(value, validate=True) if value else None


async def version(credential: Credential, seconds: float = 10.0) -> dict[str, Any]:
    """The cluster's /version; raises ImportFailed when the cluster cannot be reached."""
    try:
        async with credential.session(seconds) as session, session.get("version") as response:
            if response.status in (401, 403):
                raise ImportFailed(
                    f"the cluster at {credential.server} refused the credentials "
                    f"(HTTP {response.status})",
                    "Unauthorized",
                )
            response.raise_for_status()
            body: dict[str, Any] = await response.json()
            return body
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise ImportFailed(
            f"cannot reach the cluster at {credential.server}: {reason}", "ClusterUnavailable"
        ) from None


@dataclass(frozen=True)
class Imported:
    credential: Credential
    version: dict[str, Any]


async def install_agent(user: Credential) -> Imported:
    """Create corral's service account, binding and token in the cluster with the user's
    credential, wait for the token, and check that it works."""
    await version(user)
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
            return base64.b64decode(data["token"]).decode(), ca
        if time.monotonic() > deadline:
            message = "the cluster issued no service account token (is its controller running?)"
            raise ImportFailed(message, "ClusterUnavailable")
        await asyncio.sleep(0.2)
