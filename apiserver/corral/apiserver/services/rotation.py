"""`rotateCertificates` on a provisioned cluster (docs/provisioning.md, "Certificate
rotation"): the request is checked and stored in `spec.rotateCertificates` under the next
generation; the cluster's provisioner rotates and rolls, and records the generation."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from lightkube.types import PatchType

from corral.apiserver.http import errors
from corral.apiserver.http.body import flag, read_json
from corral.apiserver.http.errors import ApiError
from corral.apiserver.keys import CONNECTIONS, KUBE, STORES
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.provisioning import rotation


async def rotate(request: web.Request, obj: Obj) -> web.Response:
    body = await read_json(request)
    ca = flag(body, "caCertificates", False)
    try:
        services = rotation.parse_services(body.get("services"))
    except ValueError as exc:
        raise errors.invalid("services", str(exc), code="InvalidOption") from exc
    name = obj["metadata"]["name"]
    if request.app[CONNECTIONS].credential(name) is None:
        raise ApiError(
            422,
            "InvalidAction",
            f"{rotation.ACTION} needs the cluster provisioned first; it is still being provisioned",
        )
    kube = request.app[KUBE]
    # Read fresh and patch at that resourceVersion: two rotations asked at once get two
    # generations or a 409, never one generation for both.
    current = as_dict(await kube.get(kinds.Cluster, name))
    previous = rotation.Request.from_spec(current.get("spec") or {})
    wanted = rotation.Request(
        generation=(previous.generation if previous else 0) + 1, ca=ca, services=services
    )
    patch: dict[str, Any] = {
        "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
        "spec": {rotation.ACTION: wanted.spec()},
    }
    stored = as_dict(await kube.patch(kinds.Cluster, name, patch, patch_type=PatchType.MERGE))
    request.app[STORES].clusters.put(stored)
    return web.json_response({"type": rotation.OUTPUT_TYPE, "message": rotation.message(wanted)})
