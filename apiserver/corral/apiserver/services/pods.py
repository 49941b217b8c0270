"""A project's pods: finding them in the cluster's cache, and running a command in one as
the caller (`pods/exec`), each run logged with who ran what where, never its output.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import Deps
from corral.apiserver.services.workloads import (
    Scope,
    cache_of,
    namespaces,
    pods_cache,
    scope,
    seen_in,
)
from corral.core import errors, logs
from corral.core.api.ids import ScopedId
from corral.core.kube import podexec
from corral.core.kube.informer import Informer, Obj
from corral.core.workloads.kinds import KINDS

log = logging.getLogger(__name__)

MAX_EXEC_OUTPUT = 1 << 20
MAX_COMMAND_WORDS = 256
# The command travels in the exec request's URL, which kube-apiserver bounds.
MAX_COMMAND_BYTES = 64 * 1024
DEFAULT_EXEC_TIMEOUT = 60


@dataclass(frozen=True)
class Pod:
    """A pod as `/v3` shows it, in the caller's scope, with the cluster's Jobs (a pod's
    workload is found through them)."""

    where: Scope
    obj: Obj
    jobs: Informer


async def visible(deps: Deps, who: Caller, pid: str) -> list[Pod]:
    """The pods of the project's namespaces; 404 without a role in it."""
    where = scope(deps, who, pid)
    pods = await pods_cache(deps, where)
    jobs = await cache_of(deps, where, KINDS["job"])
    members = await namespaces(deps, where)
    return [
        Pod(where, pod, jobs)
        for namespace in members
        for pod in pods.by_index("namespace", namespace)
    ]


async def find(deps: Deps, who: Caller, pid: str, text: str) -> Pod | None:
    """The pod `<namespace>:<name>` in the project, if it has one."""
    where = scope(deps, who, pid)
    wanted = ScopedId.parse_or_none(text)
    if wanted is None or wanted.namespace not in await namespaces(deps, where):
        return None
    obj = (await pods_cache(deps, where)).get(wanted.key)
    if obj is None:
        return None
    return Pod(where, obj, await cache_of(deps, where, KINDS["job"]))


async def changed(deps: Deps, who: Caller, cluster: str, obj: Obj) -> Pod | None:
    """A pod of `cluster` a change was seen of, if the caller has a role in its project
    (`GET /v3/subscribe`)."""
    where = await seen_in(deps, who, cluster, obj)
    if where is None:
        return None
    return Pod(where, obj, await cache_of(deps, where, KINDS["job"]))


def container_of(obj: Obj, value: Any) -> str:
    """The container a request names, or the pod's only one."""
    names: list[str] = [c["name"] for c in (obj.get("spec") or {}).get("containers") or []]
    if value in (None, "") and len(names) == 1:
        return names[0]
    if value not in names:
        raise errors.invalid("container", f"container must be one of {', '.join(names)}")
    return str(value)


async def execute(deps: Deps, who: Caller, pod: Pod, body: dict[str, Any]) -> podexec.ExecResult:
    """Runs the body's command in a container of the pod, as the caller; logged with who ran
    what where (never its output, which may hold anything)."""
    command = body.get("command")
    if (
        not isinstance(command, list)
        or not 1 <= len(command) <= MAX_COMMAND_WORDS
        or not all(isinstance(word, str) for word in command)
        or sum(len(word.encode()) for word in command) > MAX_COMMAND_BYTES
    ):
        raise errors.invalid(
            "command",
            f"command must be a list of 1 to {MAX_COMMAND_WORDS} words (text), "
            f"{MAX_COMMAND_BYTES // 1024} KiB in all",
        )
    container = container_of(pod.obj, body.get("container"))
    timeout = body.get("timeout", DEFAULT_EXEC_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 300:
        raise errors.invalid("timeout", "timeout must be a whole number of seconds, 1 to 300")
    meta, cluster = pod.obj["metadata"], pod.where.cluster
    log.info(
        "exec: user %s runs %s in pod %s/%s container %s of cluster %s",
        who.user_id,
        logs.words(command)[:2048],
        meta["namespace"],
        meta["name"],
        container,
        cluster,
    )
    connection = await deps.connections.connection(cluster)
    result = await podexec.execute(
        connection,
        meta["namespace"],
        meta["name"],
        container,
        command,
        timeout=timeout,
        limit=MAX_EXEC_OUTPUT,
        who=pod.where.who,
    )
    log.info(
        "exec: user %s in pod %s/%s exited %d",
        who.user_id,
        meta["namespace"],
        meta["name"],
        result.exit_code,
    )
    return result
