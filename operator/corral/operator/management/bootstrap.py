"""What must exist before anyone can use corral: corral's namespace, the settings with their
defaults, and an administrator."""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Namespace, Secret

from corral.core import settings
from corral.core.api import drivers, names
from corral.core.drivers import source
from corral.core.kube import kinds, password_secrets, usernames
from corral.core.kube.client import as_dict

log = logging.getLogger(__name__)

# Fixed, so that two replicas starting at once cannot create two administrators.
ADMIN_ID = "u-admin"
ADMIN_USERNAME = "admin"
ADMIN_BINDING = "grb-admin"
BOOTSTRAP_SECRET = "bootstrap-secret"


async def run(kube: AsyncClient) -> None:
    await ensure_namespace(kube)
    await ensure_settings(kube)
    await ensure_admin(kube, os.environ.get("CORRAL_BOOTSTRAP_PASSWORD"))
    await ensure_local_cluster(kube)
    await ensure_builtin_drivers(kube)


async def ensure_builtin_drivers(kube: AsyncClient) -> None:
    """The builtin `kwok` driver, active when first made; an admin may deactivate it, and it
    stays so."""
    await create_if_missing(kube, kinds.NodeDriver(
        metadata=ObjectMeta(name=names.KWOK_DRIVER),
        spec={"displayName": "kwok", "url": source.BUILTIN_URL, "builtin": True,
              "active": True, "checksum": "",
              "description": "Simulated nodes (kwok) that join the cluster with the "
                             "capacity their template gives"},
    ))  # fmt: skip


async def ensure_local_cluster(kube: AsyncClient) -> None:
    """The management cluster is the cluster `local`."""
    await create_if_missing(kube, kinds.Cluster(
        metadata=ObjectMeta(name=names.LOCAL_CLUSTER),
        spec={"displayName": "local", "driver": drivers.LOCAL,
              "description": "The management cluster corral runs in"},
    ))  # fmt: skip


async def ensure_namespace(kube: AsyncClient) -> None:
    await create_if_missing(kube, Namespace(metadata=ObjectMeta(name=names.SYSTEM_NAMESPACE)))


async def ensure_settings(kube: AsyncClient) -> None:
    """Every known setting exists with its current default; values set by users stay."""
    for definition in settings.CATALOG.values():
        setting = kinds.Setting(
            metadata=ObjectMeta(name=definition.name), default=definition.default
        )
        # Server-side apply of `default` alone: a `value` set by an admin is another field.
        await kube.apply(setting, field_manager="corral-operator-defaults", force=True)


async def ensure_admin(kube: AsyncClient, password: str | None) -> None:
    """Create the `admin` user on first start.

    The password comes from CORRAL_BOOTSTRAP_PASSWORD; without it one is generated and kept
    in the Secret svc-system/bootstrap-secret. Either way it is never logged.
    """
    try:
        existing = as_dict(await kube.get(kinds.User, ADMIN_ID))
    except ApiError as exc:
        if exc.status.code != 404:
            raise
    else:
        # Installations from before usernames were claimed have an admin without a claim.
        await claim_admin_username(kube, existing["metadata"]["uid"])
        return
    if not password:
        password = secrets.token_urlsafe(18)
        await create_if_missing(kube, Secret(
            metadata=ObjectMeta(name=BOOTSTRAP_SECRET, namespace=names.SYSTEM_NAMESPACE),
            stringData={"bootstrapPassword": password},
        ))  # fmt: skip
        log.warning("created user %s; its password is in Secret %s/%s (key bootstrapPassword)",
                    ADMIN_USERNAME, names.SYSTEM_NAMESPACE, BOOTSTRAP_SECRET)  # fmt: skip
    user = kinds.User(
        metadata=ObjectMeta(name=ADMIN_ID),
        spec={"username": ADMIN_USERNAME, "displayName": "Default Admin", "enabled": True},
    )
    await usernames.claim(kube, ADMIN_USERNAME, ADMIN_ID)
    if not await create_if_missing(kube, user):
        return  # another replica got there first
    uid = as_dict(await kube.get(kinds.User, ADMIN_ID))["metadata"]["uid"]
    await usernames.own(kube, ADMIN_USERNAME, ADMIN_ID, uid)
    # The binding before the password: a login that works is an administrator's, never for a
    # moment a plain user's (the local environment's first import was refused 403 that way).
    await create_if_missing(kube, kinds.GlobalRoleBinding(
        metadata=ObjectMeta(name=ADMIN_BINDING),
        spec={"globalRoleName": "admin", "userName": ADMIN_ID},
    ))  # fmt: skip
    await password_secrets.store(kube, ADMIN_ID, uid, password)
    log.info("bootstrapped administrator %s (%s)", ADMIN_USERNAME, ADMIN_ID)


async def claim_admin_username(kube: AsyncClient, uid: str) -> None:
    """The admin holds its username as every user does (`usernames`)."""
    try:
        await usernames.claim(kube, ADMIN_USERNAME, ADMIN_ID)
    except usernames.UsernameTaken:
        log.warning("the username %s is claimed by another user than %s", ADMIN_USERNAME, ADMIN_ID)
        return
    await usernames.own(kube, ADMIN_USERNAME, ADMIN_ID, uid)


async def create_if_missing(kube: AsyncClient, obj: Any) -> bool:
    """Create the object; False when it already existed."""
    try:
        await kube.create(obj)
    except ApiError as exc:
        if exc.status.code == 409:
            return False
        raise
    return True
