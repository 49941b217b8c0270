"""Provider secrets (spec 2.2): the Secret `svc-system/<user id>-secret`, type Opaque, one
entry per provider id holding the refresh token it gave at sign-in. Created at the first
sign-in with the provider, replaced on each refresh, owned by the User so that Kubernetes
removes it with the user. Its values are never logged nor returned."""

from __future__ import annotations

import base64

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Secret
from lightkube.types import PatchType

from corral.core.api import names


async def read(kube: AsyncClient, user_id: str, provider: str) -> str | None:
    try:
        secret = await kube.get(
            Secret, names.provider_secret_name(user_id), namespace=names.SYSTEM_NAMESPACE
        )
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    encoded = (secret.data or {}).get(provider)
    return base64.b64decode(encoded).decode() if encoded else None


async def store(kube: AsyncClient, user_id: str, user_uid: str, provider: str, value: str) -> None:
    """Sets the provider's entry, creating the Secret at the first sign-in; other providers'
    entries stay (server-side apply owns only this entry)."""
    owner = OwnerReference(apiVersion=names.API_VERSION, kind=names.USER.kind, name=user_id,
                           uid=user_uid)  # fmt: skip
    secret = Secret(
        metadata=ObjectMeta(
            name=names.provider_secret_name(user_id),
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_AUTH_PROVIDER: provider},
            ownerReferences=[owner],
        ),
        type="Opaque",
        data={provider: base64.b64encode(value.encode()).decode()},
    )
    await kube.apply(secret, field_manager=f"corral-provider-{provider}", force=True)


async def remove(kube: AsyncClient, user_id: str, provider: str) -> None:
    """Drops the provider's entry (a refresh token the provider refused is dead)."""
    try:
        await kube.patch(Secret, names.provider_secret_name(user_id),
                         {"data": {provider: None}}, namespace=names.SYSTEM_NAMESPACE,
                         patch_type=PatchType.MERGE)  # fmt: skip
    except KubeApiError as exc:
        if exc.status.code != 404:
            raise
