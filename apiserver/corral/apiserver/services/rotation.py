"""`rotateCertificates` on a provisioned cluster (docs/provisioning.md, "Certificate
rotation"): the request is checked and stored in `spec.rotateCertificates` under the next
generation; the cluster's provisioner rotates and rolls, and records the generation."""

from __future__ import annotations

from typing import Any

from corral.apiserver.deps import Deps
from corral.apiserver.http.body import flag
from corral.apiserver.services import clusters
from corral.core import errors, jsonpatch
from corral.core.kube.guarded import GENERATION
from corral.core.kube.informer import Obj
from corral.core.provisioning import rotation


async def rotate(deps: Deps, obj: Obj, body: dict[str, Any]) -> rotation.Request:
    """The rotation stored, with the generation it was given."""
    ca = flag(body, "caCertificates", False)
    try:
        services = rotation.parse_services(body.get("services"))
    except ValueError as exc:
        raise errors.invalid("services", str(exc), code="InvalidOption") from exc
    name = obj["metadata"]["name"]
    if deps.connections.credential(name) is None:
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
    stored = await clusters.write(deps, name, decide, [GENERATION])
    wanted = rotation.Request.from_spec(stored["spec"])
    assert wanted is not None  # just written
    return wanted
