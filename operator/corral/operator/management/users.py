"""Users: deleting one removes every credential and grant it had."""

from __future__ import annotations

import logging
from typing import Any

import kopf
from lightkube import AsyncClient

from corral.core.api import names
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, delete_if_present

log = logging.getLogger(__name__)


@kopf.on.delete(names.GROUP, names.VERSION, names.USER.plural)
async def remove_credentials(name: str, memo: kopf.Memo, **_: Any) -> None:
    """The password Secret, the provider Secret (`<user id>-secret`, spec 2.2) with its
    refresh tokens, the UserAttribute with the user's groups, node templates and cloud
    credentials go by garbage collection (the User owns them); tokens and role bindings name
    the user only by id, so they are deleted here."""
    kube: AsyncClient = memo.kube
    tokens = [t async for t in kube.list(kinds.Token, labels={names.LABEL_TOKEN_USER: name})]
    deleted = {"tokens": 0, "bindings": 0}
    for token in tokens:
        await delete_if_present(kube, kinds.Token, as_dict(token)["metadata"]["name"])
        deleted["tokens"] += 1
    bindings: list[tuple[Any, dict[str, Any]]] = [
        (kinds.GlobalRoleBinding, as_dict(b)) async for b in kube.list(kinds.GlobalRoleBinding)
    ]
    for resource in (kinds.ProjectRoleTemplateBinding, kinds.ClusterRoleTemplateBinding):
        bindings += [(resource, as_dict(b)) async for b in kube.list(resource, namespace="*")]
    for resource, binding in bindings:
        meta = binding["metadata"]
        if binding.get("spec", {}).get("userName") == name:
            await delete_if_present(kube, resource, meta["name"], meta.get("namespace"))
            deleted["bindings"] += 1
    log.info("user %s deleted with %d tokens and %d bindings", name, *deleted.values())
