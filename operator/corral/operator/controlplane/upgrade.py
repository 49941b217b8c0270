"""A `kubernetesVersion` change of a hosted control plane, the operator's half
(`corral.core.provisioning.upgrade` decides what): the version the control plane reports."""

from __future__ import annotations

import aiohttp

from corral.core.kube.credential import session_for
from corral.operator.state import State


async def served_version(state: State, cluster: str) -> str | None:
    """The `gitVersion` that `/version` of the control plane's Service reports with corral's
    credential, as everything of corral reaches it; None when it does not answer."""
    credential = state.connections.credential(cluster)
    if credential is None:
        return None
    # A new connection, not a kept-alive one to a pod that may be gone.
    async with session_for(credential, timeout=5) as session:
        try:
            async with session.get(credential.url("version")) as response:
                if response.status != 200:
                    return None
                found = await response.json()
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            return None
    version = found.get("gitVersion") if isinstance(found, dict) else None
    return version if isinstance(version, str) else None
