"""Creating a project: its Project, the namespaces it needs and its creator's owner binding."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta

from corral.apiserver.deps import DEPS
from corral.apiserver.services import bindings
from corral.core.api import ids, names
from corral.core.kube import kinds
from corral.core.kube.client import as_dict, ensure_namespace
from corral.core.kube.informer import Obj


async def create_project(
    request: web.Request, cluster: str, spec: dict[str, Any], creator: str
) -> Obj:
    """The Project in its cluster's namespace, with its backing namespace (where its role
    bindings live) and the creator bound as its owner, so the creator sees it at once."""
    name = ids.generate("p")
    kube = request.app[DEPS].kube
    await ensure_namespace(kube, cluster, {names.LABEL_CLUSTER: cluster})
    metadata = ObjectMeta(
        name=name, namespace=cluster, annotations={names.ANNOTATION_CREATOR: creator}
    )
    created = as_dict(await kube.create(kinds.Project(metadata=metadata, spec=spec)))
    await ensure_namespace(
        kube,
        names.backing_namespace(cluster, name),
        names.backing_namespace_labels(cluster, name),
    )
    request.app[DEPS].stores.projects.put(created)
    await bindings.bind_creator(request, created, creator)
    return created
