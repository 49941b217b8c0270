"""Setting corral up in a cluster being imported, with the user's credential: what makes the
cluster known, whether it answers as Kubernetes does, and corral's own service account, bound
to `cluster-admin`, whose token becomes corral's credential (`corral.core.clusters.importing`
has the rules: what a kubeconfig may hold, and the errors).

An imported cluster's token is the legacy token Secret, which never expires and which the
cluster's kube-controller-manager fills in. A hosted control plane's is asked of the
TokenRequest API, which the apiserver answers itself: its controller manager starts seconds
after its apiserver, and the provisioner renews the token before it expires
(`corral.core.provisioning.agent_token`)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from lightkube import ApiError, AsyncClient
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef, Subject
from lightkube.resources.core_v1 import Namespace, Secret, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRoleBinding

from corral.core.clusters.credential import Credential
from corral.core.clusters.importing import (
    AGENT_NAME,
    AGENT_NAMESPACE,
    VISIBLE,
    ImportFailed,
    not_kubernetes,
)
from corral.core.kube.credential import client_for, session_for

AGENT_TOKEN_SECRET = "corral-token"
TOKEN_TIMEOUT = 30.0
# A real /version answer is a few hundred bytes; a server answering more is not read whole.
VERSION_MAX_BYTES = 64 * 1024
_UID = re.compile(r"[0-9A-Za-z-]{1,64}")


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
        return session_for(credential, seconds)
    except (ssl.SSLError, ValueError) as exc:
        raise ImportFailed(f"kubeConfig's certificates cannot be used: {exc}") from None


async def identify(user: Credential) -> str:
    """What makes the cluster itself known, whichever URL or credential reaches it: the uid
    of its `kube-system` namespace, which lives as long as the cluster."""
    await version(user)
    client = client_for(user)
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


async def install_agent(user: Credential, token_seconds: int | None = None) -> Imported:
    """Create corral's service account and binding in the cluster with the user's credential
    (checked by `identify` first), then its token, and check that it works. The token is the
    legacy token Secret's, awaited from the controller manager; with `token_seconds`, one of
    that lifetime from the TokenRequest API instead."""
    client = client_for(user)
    objects: list[Any] = [
        Namespace(metadata=ObjectMeta(name=AGENT_NAMESPACE)),
        ServiceAccount(metadata=ObjectMeta(name=AGENT_NAME, namespace=AGENT_NAMESPACE)),
        ClusterRoleBinding(
            metadata=ObjectMeta(name=AGENT_NAME),
            roleRef=RoleRef(
                apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"
            ),
            subjects=[Subject(kind="ServiceAccount", name=AGENT_NAME, namespace=AGENT_NAMESPACE)],
        ),
    ]
    if token_seconds is None:
        objects.append(
            Secret(
                metadata=ObjectMeta(
                    name=AGENT_TOKEN_SECRET,
                    namespace=AGENT_NAMESPACE,
                    annotations={"kubernetes.io/service-account.name": AGENT_NAME},
                ),
                type="kubernetes.io/service-account-token",
            )
        )
    try:
        for obj in objects:
            await client.apply(obj, force=True)
        if token_seconds is None:
            token, ca = await _await_token(client)
        else:
            token, ca = await _request_token(client, token_seconds), None
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


async def request_token(user: Credential, seconds: int) -> str:
    """A new token of corral's service account, valid for `seconds`, asked with `user`'s
    credential."""
    client = client_for(user)
    try:
        return await _request_token(client, seconds)
    finally:
        await client.close()


async def _request_token(client: AsyncClient, seconds: int) -> str:
    """A token from the TokenRequest API, for the apiserver's own audience (none given)."""
    request = ServiceAccount.Token(
        metadata=ObjectMeta(), spec=TokenRequestSpec(audiences=[], expirationSeconds=seconds)
    )
    answer = await client.create(request, AGENT_NAME, namespace=AGENT_NAMESPACE)
    token = (answer.status.token if answer.status else None) or ""
    if not VISIBLE.fullmatch(token):
        raise ValueError("the service account token is not a bearer token")
    return token


async def _await_token(client: AsyncClient) -> tuple[str, bytes | None]:
    """kube-controller-manager fills in the token of a service-account-token Secret."""
    deadline = time.monotonic() + TOKEN_TIMEOUT
    while True:
        secret = await client.get(Secret, AGENT_TOKEN_SECRET, namespace=AGENT_NAMESPACE)
        data = secret.data or {}
        if data.get("token"):
            ca = base64.b64decode(data["ca.crt"]) if data.get("ca.crt") else None
            token = base64.b64decode(data["token"]).decode()
            if not VISIBLE.fullmatch(token):
                raise ValueError("the service account token is not a bearer token")
            return token, ca
        if time.monotonic() > deadline:
            message = "the cluster issued no service account token (is its controller running?)"
            raise ImportFailed(message, "ClusterUnavailable")
        await asyncio.sleep(0.2)
