"""Where a local user's password hash is kept: the Secret svc-system/<user id>-password,
owned by the User so that Kubernetes deletes it with the user."""

from __future__ import annotations

import asyncio
import base64

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.auth import passwords


async def read_hash(kube: AsyncClient, user_id: str) -> str | None:
    try:
        secret = await kube.get(
            Secret, names.password_secret_name(user_id), namespace=names.SYSTEM_NAMESPACE
        )
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    encoded = (secret.data or {}).get("hash")
    return base64.b64decode(encoded).decode() if encoded else None


async def verify(kube: AsyncClient, user_id: str | None, password: str) -> bool:
    """Whether the password is the user's. Runs the slow hash even for an unknown user, so
    that timing does not tell which usernames exist."""
    stored = await read_hash(kube, user_id) if user_id else None
    # Argon2 takes ~100 ms of CPU: off the event loop, so other requests keep flowing.
    return await asyncio.to_thread(passwords.verify_password, stored, password)


async def store(kube: AsyncClient, user_id: str, user_uid: str, password: str) -> None:
    digest = await asyncio.to_thread(passwords.hash_password, password)
    owner = OwnerReference(
        apiVersion=names.API_VERSION, kind=names.USER.kind,
        name=user_id, uid=user_uid,
    )  # fmt: skip
    secret = Secret(
        metadata=ObjectMeta(
            name=names.password_secret_name(user_id),
            namespace=names.SYSTEM_NAMESPACE,
            ownerReferences=[owner],
        ),
        type="Opaque",
        data={"hash": base64.b64encode(digest.encode()).decode()},
    )
    await kube.apply(secret, force=True)
