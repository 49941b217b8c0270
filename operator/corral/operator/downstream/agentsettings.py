"""A registered cluster's agent kept in step with its agent settings: when the Deployment the
manifest made carries other settings than the cluster's spec (a PUT changed
`agentEnvVars` or `clusterAgentDeploymentCustomization`), it is replaced through the tunnel
with the spec's, which rolls the agent (docs/design/cluster-agent.md, section 9). The tunnel
goes with the old agent and comes back with the new one.
"""

from __future__ import annotations

import logging
from typing import cast

from lightkube import ApiError, AsyncClient
from lightkube.resources.apps_v1 import Deployment

from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.tunnel import manifest, settings

log = logging.getLogger(__name__)


async def sync(cluster: str, client: AsyncClient, spec: Obj) -> bool:
    """Whether the agent's Deployment was changed. One not there (removed by hand, or a
    cluster whose agent runs otherwise) is left alone."""
    env = spec.get(settings.AGENT_ENV) or []
    customization = spec.get(settings.CUSTOMIZATION) or {}
    try:
        current = as_dict(await client.get(Deployment, manifest.NAME, namespace=manifest.NAMESPACE))
    except ApiError as exc:
        if exc.status.code == 404:
            return False
        raise
    template = current["spec"]["template"].get("metadata") or {}
    carried = (template.get("annotations") or {}).get(manifest.ANNOTATION_SETTINGS)
    if carried == manifest.settings_digest(env, customization):
        return False
    changed = manifest.with_settings(current, env, customization)
    # The resourceVersion read goes with it: a Deployment changed meanwhile is a conflict,
    # and the next pass reads it again.
    await client.replace(cast(Deployment, Deployment.from_dict(changed)))
    log.info("cluster %s: its agent rolls with new settings", cluster)
    return True
