"""Settings: those of the catalog and any stored; every user reads them, only administrators
change them."""

from __future__ import annotations

from typing import Any

from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.auth.authz import Caller, require_admin
from corral.apiserver.deps import Deps
from corral.apiserver.http.body import text
from corral.core import errors, settings
from corral.core.kube import kinds
from corral.core.kube.client import as_dict


def names(deps: Deps) -> list[str]:
    stored = {o["metadata"]["name"] for o in deps.stores.settings.all()}
    return sorted(stored | set(settings.CATALOG))


def may_change(who: Caller) -> None:
    require_admin(who, "change settings")


async def change(deps: Deps, who: Caller, name: str, body: dict[str, Any]) -> None:
    may_change(who)
    # A body without `value` is a mistake, not a reset: resetting is explicit, `"value": ""`.
    if body.get("value") is None:
        raise errors.missing("value")
    value = text(body, "value", max_length=settings.MAX_VALUE)
    if name in settings.CATALOG and value:
        settings.check(name, value)
    definition = settings.CATALOG.get(name)
    obj = kinds.Setting(metadata=ObjectMeta(name=name), value=value,
                        default=definition.default if definition else "")  # fmt: skip
    applied = await deps.kube.apply(obj, force=True)
    deps.stores.settings.put(as_dict(applied))
