"""Users: deleting one removes every credential and grant it had."""

from __future__ import annotations

import logging
from typing import Any

import kopf
from lightkube import AsyncClient

from corral.core import resources
from corral.core.kube import as_dict, delete_if_present

log = logging.getLogger(__name__)


@kopf.on.delete(resources.GROUP, resources.VERSION, "users")
async def remove_credentials(name: str, memo: kopf.Memo, **_: Any) -> None:
    """The password Secret goes by garbage collection (it is owned by the User); tokens and
    global role bindings name the user only by id, so they are deleted here."""
    kube: AsyncClient = memo.kube
    tokens = [
        t async for t in kube.list(resources.Token, labels={resources.LABEL_TOKEN_USER: name})
    ]
    bindings = [b async for b in kube.list(resources.GlobalRoleBinding)
                if b.get("spec", {}).get("userName") == name]  # fmt: skip
    for resource, objs in ((resources.Token, tokens), (resources.GlobalRoleBinding, bindings)):
        for obj in objs:
            await delete_if_present(kube, resource, as_dict(obj)["metadata"]["name"])
    log.info("user %s deleted with %d tokens and %d bindings", name, len(tokens), len(bindings))
