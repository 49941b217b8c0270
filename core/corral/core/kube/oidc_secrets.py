"""The Secrets of the sign-in providers' configurations in svc-system: each provider's client
secret (`<provider>config-clientsecret`: `oidcconfig-clientsecret`,
`keycloakoidcconfig-clientsecret`, `githubconfig-clientsecret`), and the key that seals
sign-in state (`corral.core.auth.loginstate`), shared by every API server replica and made by
whichever needs it first."""

from __future__ import annotations

import base64

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.auth import loginstate


async def read_client_secret(kube: AsyncClient, provider: str) -> str | None:
    data = await _read(kube, names.client_secret_name(provider))
    value = (data or {}).get("clientSecret", b"").decode()
    return value or None


async def store_client_secret(kube: AsyncClient, provider: str, value: str) -> None:
    secret = Secret(
        metadata=ObjectMeta(
            name=names.client_secret_name(provider), namespace=names.SYSTEM_NAMESPACE
        ),
        type="Opaque",
        data={"clientSecret": base64.b64encode(value.encode()).decode()},
    )
    await kube.apply(secret, force=True)


async def state_key(kube: AsyncClient) -> bytes:
    """The sealing key; created once (of two replicas racing, Kubernetes keeps one)."""
    data = await _read(kube, names.OIDC_STATE_KEY)
    if data is not None and data.get("key"):
        return data["key"]
    secret = Secret(
        metadata=ObjectMeta(name=names.OIDC_STATE_KEY, namespace=names.SYSTEM_NAMESPACE),
        type="Opaque",
        data={"key": base64.b64encode(loginstate.new_key()).decode()},
    )
    try:
        await kube.create(secret)
    except KubeApiError as exc:
        if exc.status.code != 409:
            raise
    data = await _read(kube, names.OIDC_STATE_KEY)
    assert data is not None  # just created, or made by another replica
    return data["key"]


async def _read(kube: AsyncClient, name: str) -> dict[str, bytes] | None:
    try:
        secret = await kube.get(Secret, name, namespace=names.SYSTEM_NAMESPACE)
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
    return {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}


class StateKey:
    """The sealing key as this process last read it: read once, not per anonymous request.
    Read again when a sealed state does not open (the Secret was made anew)."""

    def __init__(self) -> None:
        self._key: bytes | None = None

    async def get(self, kube: AsyncClient, reread: bool = False) -> bytes:
        if self._key is None or reread:
            self._key = await state_key(kube)
        return self._key
