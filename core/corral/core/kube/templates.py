"""What a node pool's machines get from their template: the template's driver config, taints
and its cloud credential's secret fields, read from the management cluster when needed (the
fields never stay in memory longer than the call that uses them)."""

from __future__ import annotations

from typing import Any

from lightkube import ApiError as KubeApiError
from lightkube import AsyncClient
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.drivers import templates
from corral.core.drivers.templates import MachineInputs
from corral.core.errors import NotFound
from corral.core.kube import kinds
from corral.core.kube.client import as_dict


async def machine_inputs(kube: AsyncClient, template: str) -> MachineInputs:
    """The inputs to the driver of `template` (`templates.machine_inputs`). NotFound when the
    template is gone; Invalid when its credential is gone or no longer fits it."""
    found = await _get(kube, kinds.NodeTemplate, template)
    if found is None:
        raise NotFound(f"node template {template} not found", "nodeTemplateName")
    credential_name = (found.get("spec") or {}).get("cloudCredentialName") or ""
    credential = secret = None
    if credential_name:
        credential = await _get(kube, kinds.CloudCredential, credential_name)
        secret = await _get(
            kube,
            Secret,
            names.cloud_credential_secret_name(credential_name),
            names.SYSTEM_NAMESPACE,
        )
    data = None if secret is None else secret.get("data") or {}
    return templates.machine_inputs(found, credential, data)


async def _get(
    kube: AsyncClient, resource: Any, name: str, namespace: str | None = None
) -> dict[str, Any] | None:
    try:
        return as_dict(await kube.get(resource, name, namespace=namespace))
    except KubeApiError as exc:
        if exc.status.code == 404:
            return None
        raise
