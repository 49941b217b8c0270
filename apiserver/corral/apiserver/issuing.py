"""Creating tokens: login sessions, derived API tokens and kubeconfig tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.stores import Stores
from corral.core.api import ids, names
from corral.core.auth import hashing
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj

NAME_ATTEMPTS = 5


@dataclass(frozen=True)
class NewToken:
    user_id: str
    kind: str  # names.KIND_* or "" for derived API tokens
    ttl_ms: int
    description: str = ""
    cluster_name: str = ""
    auth_provider: str = "local"
    name: str | None = None  # None picks token-<random>
    labels: dict[str, str] | None = None


@dataclass(frozen=True)
class Issued:
    obj: Obj
    value: str  # `<name>:<key>`: shown once, never stored


async def issue(kube: AsyncClient, stores: Stores, new: NewToken, hashed: bool) -> Issued:
    key = hashing.new_key()
    stored = hashing.hash_key(key) if hashed else key
    user = stores.users.get(new.user_id) or {}
    labels = {**(new.labels or {}), names.LABEL_TOKEN_USER: new.user_id}
    if new.kind:
        labels[names.LABEL_TOKEN_KIND] = new.kind
    annotations = {names.ANNOTATION_TOKEN_HASHED: "true"} if hashed else {}
    spec: dict[str, Any] = {
        "token": stored,
        "ttlMillis": new.ttl_ms,
        "description": new.description,
        "userId": new.user_id,
        "authProvider": new.auth_provider,
        "userPrincipal": {
            "name": f"{new.auth_provider}://{new.user_id}",
            "displayName": user.get("spec", {}).get("displayName", ""),
        },
        "isDerived": new.kind != names.KIND_SESSION,
        "clusterName": new.cluster_name,
    }
    for _ in range(NAME_ATTEMPTS):
        name = new.name or ids.generate("token")
        token = kinds.Token(
            metadata=ObjectMeta(name=name, labels=labels, annotations=annotations), spec=spec
        )
        try:
            created = await kube.create(token)
        except KubeApiError as exc:
            # A random name may collide with an existing token; a fixed one may not.
            if exc.status.code == 409 and new.name is None:
                continue
            raise
        obj = as_dict(created)
        stores.tokens.put(obj)
        return Issued(obj, f"{name}:{key}")
    raise RuntimeError("could not find a free token name")
