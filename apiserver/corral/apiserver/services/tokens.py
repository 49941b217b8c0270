"""Issuing tokens (login sessions, derived API tokens, kubeconfig tokens), a user's own tokens
through `/v3/tokens`, and revoking them.

Lifetimes come from the settings and are clamped to `auth-token-max-ttl-minutes`; whether the
key is stored hashed, from the `TokenHashing` feature.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import description_text, or_empty, referenced
from corral.apiserver.services.visibility import visible_cluster
from corral.core import errors
from corral.core.api import ids, names
from corral.core.auth import hashing, ttl
from corral.core.auth.tokens import TokenRecord, is_system_name, kubeconfig_token_name
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present
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
    principal: str = ""  # the provider's principal id; `<provider>://<user id>` when empty
    name: str | None = None  # None picks token-<random>
    labels: dict[str, str] | None = None


@dataclass(frozen=True)
class Issued:
    obj: Obj
    value: str  # `<name>:<key>`: shown once, never stored


def listed(deps: Deps, who: Caller) -> list[TokenRecord]:
    """The caller's tokens but system tokens, which no user manages through the API."""
    return [record for record in deps.stores.user_tokens(who.user_id) if not record.is_system]


def own(deps: Deps, who: Caller, name: str) -> TokenRecord | None:
    """The caller's token by name; another user's token, and a system token (whoever holds
    it, administrators included), are indistinguishable from none."""
    obj = deps.stores.tokens.get(name)
    if obj is None:
        return None
    record = deps.stores.token_record(obj)
    return None if record.user_id != who.user_id or record.is_system else record


def refuse_system(name: str) -> None:
    """By name, before any lookup: the names are fixed and documented, so the answer tells
    nobody whether one exists."""
    if is_system_name(name):
        raise errors.forbidden(f"{name} is a system token: it cannot be deleted through the API")


async def create(deps: Deps, who: Caller, body: dict[str, Any]) -> Issued:
    """An API token the caller derives from theirs, from a `/v3/tokens` body."""
    requested = ttl.requested(body.get("ttlMillis", body.get("ttl", 0)))
    description = description_text(body)
    cluster = or_empty(body.get("clusterId"), "")
    if not isinstance(cluster, str):
        raise errors.invalid("clusterId", "clusterId must be a cluster id")
    if cluster:
        referenced(lambda: visible_cluster(deps, who, cluster), "clusterId", "cluster")
    return await issue_api_token(deps, who, requested, description, cluster)


async def issue(deps: Deps, new: NewToken) -> Issued:
    kube, stores = deps.kube, deps.stores
    hashed = deps.features["TokenHashing"]
    key = hashing.new_key()
    stored = hashing.hash_key(key) if hashed else key
    user = stores.users.get(new.user_id) or {}
    labels = {
        **(new.labels or {}),
        names.LABEL_TOKEN_USER: new.user_id,
        names.INDEX_TOKEN_KEY: hashing.index_digest(key),
    }
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
            "name": new.principal or f"{new.auth_provider}://{new.user_id}",
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


async def issue_session(
    deps: Deps,
    user_id: str,
    description: str,
    auth_provider: str = "local",
    principal: str = "",
) -> Issued:
    """A login session of `auth-user-session-ttl-minutes`, whichever provider signed in."""
    session_ttl = ttl.minutes_to_ms(deps.stores.number("auth-user-session-ttl-minutes"))
    new = NewToken(
        user_id=user_id,
        kind=names.KIND_SESSION,
        ttl_ms=ttl.clamp(session_ttl, _max_ttl(deps)),
        description=description,
        auth_provider=auth_provider,
        principal=principal,
    )
    return await issue(deps, new)


async def issue_api_token(
    deps: Deps, who: Caller, ttl_ms: int, description: str, cluster: str
) -> Issued:
    """A token derived by the caller, scoped to `cluster` unless that is empty."""
    new = NewToken(
        user_id=who.user_id,
        kind="",
        ttl_ms=ttl.clamp(ttl_ms, _max_ttl(deps)),
        description=description,
        cluster_name=cluster,
        auth_provider=who.principal.token.auth_provider or "local",
    )
    return await issue(deps, new)


async def issue_kubeconfig_token(
    deps: Deps, who: Caller, cluster_id: str, ttl_ms: int | None
) -> Issued:
    """The caller's one kubeconfig token for the cluster, `kubeconfig-<username>.<cluster>`:
    issuing it again replaces it (the key of the old one is not kept, so it cannot be handed
    out again). `ttl_ms` None takes `kubeconfig-default-token-ttl-minutes`; either way the
    lifetime is clamped by `auth-token-max-ttl-minutes`."""
    stores = deps.stores
    username = (stores.users.get(who.user_id) or {}).get("spec", {}).get("username", "")
    token_name = kubeconfig_token_name(username, who.user_id, cluster_id)
    if ttl_ms is None:
        ttl_ms = ttl.minutes_to_ms(stores.number("kubeconfig-default-token-ttl-minutes"))
    new = NewToken(
        user_id=who.user_id,
        kind=names.KIND_KUBECONFIG,
        ttl_ms=ttl.clamp(ttl_ms, _max_ttl(deps)),
        description=f"kubeconfig for cluster {cluster_id}",
        cluster_name=cluster_id,
        auth_provider=who.principal.token.auth_provider or "local",
        name=token_name,
        labels={names.LABEL_KUBECONFIG_ID: f"{who.user_id}.{cluster_id}"},
    )
    for _ in range(NAME_ATTEMPTS):
        await revoke(deps, token_name)
        try:
            return await issue(deps, new)
        except KubeApiError as exc:
            # Another generation for the same user and cluster made it in between: the
            # latest one wins, as it would had they come one after the other.
            if exc.status.code != 409:
                raise
    raise RuntimeError(f"could not replace the token {token_name}")


async def revoke(deps: Deps, name: str) -> None:
    """Deletes the token; this replica stops accepting it at once."""
    await delete_if_present(deps.kube, kinds.Token, name)
    deps.stores.tokens.forget(name)
    deps.activity.forget(name)


async def revoke_all(deps: Deps, who: Caller) -> None:
    """Every token of the caller but system tokens."""
    for record in listed(deps, who):
        await revoke(deps, record.name)


async def end_sessions(deps: Deps, user_id: str, keep: str) -> None:
    """A new password ends the user's other login sessions; API tokens stay valid."""
    for obj in deps.stores.tokens.by_index("user", user_id):
        record = deps.stores.token_record(obj)
        if record.is_session and record.name != keep:
            await revoke(deps, record.name)


def _max_ttl(deps: Deps) -> int:
    return ttl.minutes_to_ms(deps.stores.number("auth-token-max-ttl-minutes"))
