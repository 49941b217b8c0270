"""`rotateCertificates` on a provisioned cluster (docs/provisioning.md, "Certificate
rotation"): the request is checked and stored in `spec.rotateCertificates` under the next
generation; the cluster's provisioner rotates and rolls, and records the generation."""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.deps import DEPS
from corral.apiserver.http.body import flag, read_json
from corral.core import errors, jsonpatch
from corral.core.kube import guarded, kinds
from corral.core.kube.guarded import GENERATION
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
    if request.app[DEPS].connections.credential(name) is None:
        raise errors.Invalid(
            f"{rotation.ACTION} needs the cluster provisioned first; it is still being provisioned",
            code="InvalidAction",
        )

    async def decide(current: Obj) -> list[jsonpatch.Operation]:
        previous = rotation.Request.from_spec(current.get("spec") or {})
        generation = (previous.generation if previous else 0) + 1
        wanted = rotation.Request(generation=generation, ca=ca, services=services)
        return [jsonpatch.add(current, ("spec", rotation.ACTION), wanted.spec())]

    # Decided on the cluster as stored now and written on condition that its spec is still
    # that one: two rotations asked at once get two generations, never one for both, and the
    # operator's status writes do not stand in the way.
    stored = await guarded.patch(request.app[DEPS].kube, kinds.Cluster, name, decide, [GENERATION])
    wanted = rotation.Request.from_spec(stored["spec"])
    assert wanted is not None  # just written
    request.app[DEPS].stores.clusters.put(stored)
    return web.json_response({"type": rotation.OUTPUT_TYPE, "message": rotation.message(wanted)})
