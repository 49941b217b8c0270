"""Asking a hosted control plane directly, as everything of corral reaches it (through its
Service, with corral's credential), on a new connection each time: a kept-alive one may lead
to a pod that a roll has just replaced. Rotations and version changes are over only once the
Service answers as the new pods do."""

from __future__ import annotations

import json

import aiohttp

from corral.core.kube.credential import session_for
from corral.operator.state import State

TIMEOUT = 5.0


async def ask(state: State, cluster: str, path: str) -> tuple[int, bytes] | None:
    """The status and body of GET `path`; None without a credential or an answer."""
    credential = state.connections.credential(cluster)
    if credential is None:
        return None
    async with session_for(credential, timeout=TIMEOUT) as session:
        try:
            async with session.get(credential.url(path)) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError):
            return None


async def ready(state: State, cluster: str) -> bool:
    """`/readyz` is 200: the rolled pods are in the Service and their certificates trusted.
    Ready pods alone may not be yet (a restarted etcd makes the apiserver's readiness flap)."""
    answer = await ask(state, cluster, "readyz")
    return answer is not None and answer[0] == 200


async def served_version(state: State, cluster: str) -> str | None:
    """The `gitVersion` that `/version` reports; None when it does not answer one."""
    answer = await ask(state, cluster, "version")
    if answer is None or answer[0] != 200:
        return None
    try:
        found = json.loads(answer[1])
    except ValueError:
        return None
    version = found.get("gitVersion") if isinstance(found, dict) else None
    return version if isinstance(version, str) else None
