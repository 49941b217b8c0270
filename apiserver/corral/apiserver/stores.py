"""The caches the API server reads from, and the questions it asks of them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from lightkube import AsyncClient, operators
from lightkube.resources.core_v1 import Secret

from corral.apiserver.cache import Obj, WatchCache
from corral.core import resources, settings
from corral.core.clusters.credential import Credential, from_environment
from corral.core.resources import LABEL_TOKEN_USER

LOCAL_REFRESH_SECONDS = 60.0


def _token_user(obj: Obj) -> list[str]:
    labels = obj["metadata"].get("labels") or {}
    return [labels[LABEL_TOKEN_USER]] if LABEL_TOKEN_USER in labels else []


def _token_key(obj: Obj) -> list[str]:
    # Only an unhashed key can be found by value; a salted hash never matches a lookup.
    stored = obj.get("spec", {}).get("token", "")
    return [stored] if stored and not stored.startswith("$") else []


def _username(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("username", "")]


def _namespace(obj: Obj) -> list[str]:
    return [obj["metadata"].get("namespace", "")]


def _binding_user(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("userName", "")]


def _binding_project(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("projectName", "")]


@dataclass
class Stores:
    tokens: WatchCache
    users: WatchCache
    bindings: WatchCache
    settings: WatchCache
    clusters: WatchCache
    nodes: WatchCache
    credentials: WatchCache
    projects: WatchCache
    project_bindings: WatchCache
    cluster_bindings: WatchCache
    _local: tuple[float, Credential] | None = None

    @classmethod
    def create(cls, client: AsyncClient) -> Stores:
        return cls(
            tokens=WatchCache(client, resources.Token, {"user": _token_user, "key": _token_key}),
            users=WatchCache(client, resources.User, {"username": _username}),
            bindings=WatchCache(client, resources.GlobalRoleBinding, {"user": _binding_user}),
            settings=WatchCache(client, resources.Setting),
            clusters=WatchCache(client, resources.Cluster),
            nodes=WatchCache(client, resources.Node, {"cluster": _namespace}, namespace="*"),
            credentials=WatchCache(
                client,
                Secret,
                namespace=resources.SYSTEM_NAMESPACE,
                labels={resources.LABEL_CLUSTER_CREDENTIAL: operators.exists()},
            ),
            projects=WatchCache(client, resources.Project, {"cluster": _namespace}, namespace="*"),
            project_bindings=WatchCache(
                client,
                resources.ProjectRoleTemplateBinding,
                {"user": _binding_user, "project": _binding_project},
                namespace="*",
            ),
            cluster_bindings=WatchCache(
                client,
                resources.ClusterRoleTemplateBinding,
                {"user": _binding_user, "cluster": _namespace},
                namespace="*",
            ),
        )

    def all(self) -> list[WatchCache]:
        return [
            self.tokens,
            self.users,
            self.bindings,
            self.settings,
            self.clusters,
            self.nodes,
            self.credentials,
            self.projects,
            self.project_bindings,
            self.cluster_bindings,
        ]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(cache.run()) for cache in self.all()]
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def token(self, name: str, key: str) -> Obj | None:
        """The token named `name`, found through the key index first (spec 5.2)."""
        for candidate in self.tokens.by_index("key", key):
            if candidate["metadata"]["name"] == name:
                return candidate
        return self.tokens.get(name)

    def number(self, name: str) -> float:
        # A bad value stored by hand must not lock everyone out; the default applies.
        return settings.number(name, self.settings.get(name))

    def user_active(self, user_id: str) -> bool | None:
        """None when the user does not exist or is being deleted; else whether enabled."""
        user = self.users.get(user_id)
        if user is None or user["metadata"].get("deletionTimestamp"):
            return None
        return user.get("spec", {}).get("enabled", True) is not False

    def is_admin(self, user_id: str) -> bool:
        return any(
            b.get("spec", {}).get("globalRoleName") == "admin"
            for b in self.bindings.by_index("user", user_id)
        )

    def user_by_username(self, username: str) -> Obj | None:
        found = self.users.by_index("username", username)
        return found[0] if found else None

    def credential(self, cluster_id: str) -> Credential | None:
        if cluster_id == resources.LOCAL_CLUSTER:
            return self._local_credential()
        secret = self.credentials.get(
            f"{resources.SYSTEM_NAMESPACE}/{resources.credential_secret_name(cluster_id)}"
        )
        return Credential.from_secret_data(secret.get("data") or {}) if secret else None

    def _local_credential(self) -> Credential:
        """This process's own connection, re-read once a minute (service account tokens
        rotate) rather than on every proxied request."""
        now = time.monotonic()
        if self._local is None or now - self._local[0] > LOCAL_REFRESH_SECONDS:
            self._local = (now, from_environment())
        return self._local[1]
