"""The caches of the management cluster's objects the API server reads from, and the questions
it asks of them (writes are put into them at once)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field

from lightkube import AsyncClient, operators
from lightkube.resources.core_v1 import Secret

from corral.apiserver.state.changes import Changes
from corral.apiserver.state.derived import Derived
from corral.core import settings
from corral.core.api import drivers, names
from corral.core.api.names import INDEX_TOKEN_KEY, LABEL_TOKEN_USER
from corral.core.auth import hashing, ownership, principals
from corral.core.auth.tokens import TokenRecord
from corral.core.kube import kinds, user_attributes
from corral.core.kube.informer import Informer, Obj
from corral.core.provisioning import catalog, v1

# Parsed token records kept: every token of a large installation, in a few MiB.
MAX_RECORDS = 20_000


def _token_kept(obj: Obj) -> Obj:
    """A token as the caches keep it: without `managedFields`, which nothing here reads and
    which is over half of a token in memory (every replica holds every token)."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _token_user(obj: Obj) -> list[str]:
    labels = obj["metadata"].get("labels") or {}
    return [labels[LABEL_TOKEN_USER]] if LABEL_TOKEN_USER in labels else []


def _token_key(obj: Obj) -> list[str]:
    """The digest of the token's key (`hashing.index_digest`): from the label a hashed token
    carries, or from the key itself when it is stored unhashed. A hashed token made before
    the label existed is not in the index; it is found by name."""
    labels = obj["metadata"].get("labels") or {}
    if INDEX_TOKEN_KEY in labels:
        return [labels[INDEX_TOKEN_KEY]]
    stored = obj.get("spec", {}).get("token", "")
    return [hashing.index_digest(stored)] if stored and not hashing.is_hashed(stored) else []


def _username(obj: Obj) -> list[str]:
    username = obj.get("spec", {}).get("username")
    return [username] if username else []  # a provider's user has none


def _namespace(obj: Obj) -> list[str]:
    return [obj["metadata"].get("namespace", "")]


def _binding_user(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("userName", "")]


def _binding_group(obj: Obj) -> list[str]:
    group = obj.get("spec", {}).get("groupPrincipalName")
    return [group] if group else []


def _principals(obj: Obj) -> list[str]:
    return list(obj.get("spec", {}).get("principalIds") or [])


def _binding_project(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("projectName", "")]


def _token_hash(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("tokenHash", "")]


def _owner(obj: Obj) -> list[str]:
    return [ownership.owner_of(obj)]


def _driver(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("driver", "")]


def _credential(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("cloudCredentialName", "")]


def _template(obj: Obj) -> list[str]:
    return [obj.get("spec", {}).get("nodeTemplateName", "")]


def _v1_name(obj: Obj) -> list[str]:
    """`<namespace>/<name>` of a provisioned cluster's /v1 view."""
    if obj.get("spec", {}).get("driver") not in drivers.HOSTED:
        return []
    return [v1.key(*v1.name_of(obj))]


@dataclass
class Stores:
    tokens: Informer
    users: Informer
    bindings: Informer
    settings: Informer
    clusters: Informer
    nodes: Informer
    projects: Informer
    project_bindings: Informer
    cluster_bindings: Informer
    nodedrivers: Informer
    nodetemplates: Informer
    cloudcredentials: Informer
    nodepools: Informer
    authconfigs: Informer
    user_attributes: Informer
    etcdbackups: Informer
    registration_tokens: Informer
    # The values of the registration tokens (their Secrets in svc-system).
    registration_values: Informer
    # The digests of the cluster agents' credentials (Secrets in svc-system).
    agent_credentials: Informer
    # Token records by the name and resourceVersion they were parsed from (`token_record`).
    _records: OrderedDict[tuple[str, str], TokenRecord] = field(default_factory=OrderedDict)
    # Each user's token records in name order, kept while none of their tokens moves.
    _user_tokens: Derived[str, list[TokenRecord]] = field(default_factory=Derived)
    # Number settings as parsed, kept while the settings do not move.
    _numbers: Derived[str, float] = field(default_factory=Derived)
    # What the caches below publish to `GET /v3/subscribe`.
    changes: Changes = field(default_factory=Changes)

    @classmethod
    def create(cls, client: AsyncClient) -> Stores:
        changes = Changes()
        return cls(
            changes=changes,
            tokens=Informer(
                client,
                kinds.Token,
                {"user": _token_user, INDEX_TOKEN_KEY: _token_key},
                keep=_token_kept,
                share_strings=True,
                versioned=("user",),
            ),
            users=Informer(client, kinds.User, {"username": _username, "principal": _principals}),
            bindings=Informer(client, kinds.GlobalRoleBinding, {"user": _binding_user}),
            settings=Informer(client, kinds.Setting),
            clusters=Informer(
                client, kinds.Cluster, {"v1": _v1_name}, on_change=changes.hook("clusters")
            ),
            nodes=Informer(
                client,
                kinds.Node,
                {"cluster": _namespace, "template": _template},
                namespace="*",
                on_change=changes.hook("nodes"),
            ),
            projects=Informer(
                client,
                kinds.Project,
                {"cluster": _namespace},
                namespace="*",
                on_change=changes.hook("projects"),
            ),
            project_bindings=Informer(
                client,
                kinds.ProjectRoleTemplateBinding,
                {"user": _binding_user, "group": _binding_group, "project": _binding_project},
                namespace="*",
                on_change=changes.hook("project_bindings"),
            ),
            cluster_bindings=Informer(
                client,
                kinds.ClusterRoleTemplateBinding,
                {"user": _binding_user, "group": _binding_group, "cluster": _namespace},
                namespace="*",
                on_change=changes.hook("cluster_bindings"),
            ),
            nodedrivers=Informer(client, kinds.NodeDriver),
            nodetemplates=Informer(
                client,
                kinds.NodeTemplate,
                {"owner": _owner, "driver": _driver, "credential": _credential},
            ),
            # No secret value is in a CloudCredential: they are in its Secret, read per request.
            cloudcredentials=Informer(client, kinds.CloudCredential, {"owner": _owner}),
            nodepools=Informer(
                client,
                kinds.NodePool,
                {"cluster": _namespace, "template": _template},
                namespace="*",
                on_change=changes.hook("nodepools"),
            ),
            # Provider configurations (their client secrets are in a Secret, read per use).
            authconfigs=Informer(client, kinds.AuthConfig),
            user_attributes=Informer(client, kinds.UserAttribute),
            etcdbackups=Informer(client, kinds.EtcdBackup, {"cluster": _namespace}, namespace="*"),
            registration_tokens=Informer(
                client,
                kinds.ClusterRegistrationToken,
                {"cluster": _namespace, "hash": _token_hash},
                namespace="*",
            ),
            registration_values=Informer(
                client,
                Secret,
                namespace=names.SYSTEM_NAMESPACE,
                labels={names.LABEL_REGISTRATION_TOKEN: operators.exists()},
                name="registration-token-values",
            ),
            agent_credentials=Informer(
                client,
                Secret,
                namespace=names.SYSTEM_NAMESPACE,
                labels={names.LABEL_AGENT_CREDENTIAL: operators.exists()},
                name="agent-credentials",
            ),
        )

    def all(self) -> list[Informer]:
        return [
            self.tokens,
            self.users,
            self.bindings,
            self.settings,
            self.clusters,
            self.nodes,
            self.projects,
            self.project_bindings,
            self.cluster_bindings,
            self.nodedrivers,
            self.nodetemplates,
            self.cloudcredentials,
            self.nodepools,
            self.authconfigs,
            self.user_attributes,
            self.etcdbackups,
            self.registration_tokens,
            self.registration_values,
            self.agent_credentials,
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
        """The token named `name`, found through the key index first (spec 5.2), then by
        name. Either way its key is verified against what it stores afterwards: a digest in a
        label is a pointer, never the proof."""
        for candidate in self.tokens.by_index(INDEX_TOKEN_KEY, hashing.index_digest(key)):
            if candidate["metadata"]["name"] == name:
                return candidate
        return self.tokens.get(name)

    def token_record(self, obj: Obj) -> TokenRecord:
        """The token object's record, parsed once per version of the object, not per request
        (the most recently used `MAX_RECORDS` are kept)."""
        meta = obj["metadata"]
        key = (meta["name"], meta.get("resourceVersion", ""))
        record = self._records.get(key)
        if record is None or not key[1]:
            record = self._records[key] = TokenRecord.from_object(obj)
            while len(self._records) > MAX_RECORDS:
                self._records.popitem(last=False)
        self._records.move_to_end(key)
        return record

    def user_tokens(self, user_id: str) -> list[TokenRecord]:
        """The records of the user's tokens in name order, made again only after one of their
        tokens came, changed or went (another user's moving leaves them kept): a user's
        token list reads them, not each of their tokens. Shared: the caller copies before
        changing it."""
        tokens = self.tokens
        stamp = (tokens, tokens.touched("user", user_id))

        def derive() -> list[TokenRecord]:
            found = (self.token_record(obj) for obj in tokens.by_index("user", user_id))
            return sorted(found, key=lambda record: record.name)

        return self._user_tokens.get(user_id, stamp, derive)

    def token_version(self, name: str) -> str | None:
        """The resourceVersion of token `name` as cached; None when there is no such token."""
        found = self.tokens.get(name)
        return found["metadata"].get("resourceVersion") if found else None

    def number(self, name: str) -> float:
        """A number setting's value in force, read once per version of the settings (every
        request reads two). A bad value stored by hand must not lock everyone out: the
        default applies."""
        found = self.settings
        return self._numbers.get(
            name, (found, found.version), lambda: settings.number(name, found.get(name))
        )

    def standing_stamp(self) -> Hashable:
        """What a token holder's standing rests on besides the token and the clock: the
        versions of the users, their global bindings and attributes, the settings and the
        providers. A judgement made under one stamp holds while it is current."""
        return (
            self.users.version,
            self.bindings.version,
            self.user_attributes.version,
            self.settings.version,
            self.authconfigs.version,
        )

    def enabled(self, name: str) -> bool:
        """A true/false setting's value in force (a bad stored one reads as its default)."""
        return settings.enabled(name, self.settings.get(name))

    def catalog(self) -> catalog.Catalog:
        """The Kubernetes versions rke2 and k3s clusters may run (a bad stored catalog reads
        as the default, as a bad number does)."""
        name = catalog.SETTING
        return catalog.parse(settings.document(name, self.settings.get(name)))

    def user_active(self, user_id: str) -> bool | None:
        """None when the user does not exist or is being deleted; else whether enabled."""
        user = self.users.get(user_id)
        if user is None or user["metadata"].get("deletionTimestamp"):
            return None
        return user.get("spec", {}).get("enabled", True) is not False

    def user_uid(self, user_id: str) -> str | None:
        user = self.users.get(user_id)
        return user["metadata"].get("uid") if user else None

    def is_admin(self, user_id: str) -> bool:
        return any(
            b.get("spec", {}).get("globalRoleName") == "admin"
            for b in self.bindings.by_index("user", user_id)
        )

    def provider_enabled(self, provider: str) -> bool:
        """The local provider always is; another, when its AuthConfig says so."""
        if provider in ("", principals.LOCAL):
            return True
        return ((self.authconfigs.get(provider) or {}).get("spec") or {}).get("enabled") is True

    def groups(self, user_id: str) -> tuple[str, ...]:
        """The group principals the user's provider last said they are in."""
        return user_attributes.groups_of(self.user_attributes.get(user_id))

    def user_by_principal(self, principal: str) -> Obj | None:
        found = self.users.by_index("principal", principal)
        return found[0] if found else None

    def user_by_username(self, username: str) -> Obj | None:
        found = self.users.by_index("username", username)
        return found[0] if found else None
