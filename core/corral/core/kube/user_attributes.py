"""A user's groups as a provider last said them: the UserAttribute named after the user,
owned by the User, written at sign-in by the API server and at each group sync by the
operator (each through server-side apply, the last writer's groups in force)."""

from __future__ import annotations

import datetime

from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta, OwnerReference

from corral.core import times
from corral.core.api import names
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj


async def record_groups(
    kube: AsyncClient,
    user_id: str,
    user_uid: str,
    provider: str,
    groups: list[str],
    now: datetime.datetime,
) -> Obj:
    owner = OwnerReference(apiVersion=names.API_VERSION, kind=names.USER.kind, name=user_id,
                           uid=user_uid)  # fmt: skip
    attribute = kinds.UserAttribute(
        metadata=ObjectMeta(name=user_id, ownerReferences=[owner]),
        userName=user_id,
        groupPrincipals={provider: groups},
        lastRefresh=times.format_time(now),
    )
    applied = await kube.apply(attribute, field_manager="corral-groups", force=True)
    return as_dict(applied)


def groups_of(attribute: Obj | None) -> tuple[str, ...]:
    """Every group principal the user's record holds, of every provider."""
    found = (attribute or {}).get("groupPrincipals") or {}
    return tuple(sorted({g for groups in found.values() for g in groups or []}))
