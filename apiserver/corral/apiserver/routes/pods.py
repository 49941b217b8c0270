"""`/v3/projects/{project_id}/pods` (spec 4.5): the pods of the project's namespaces, their
logs, and commands run in them.

Logs and commands go through the downstream kube-apiserver's `pods/log` and `pods/exec`, so
they reach whatever runs the pod (a kubelet, or kwok for simulated nodes). Every role in the
project may read pods and their logs (Kubernetes' `view` role, which read-only users are
bound to downstream, reads logs too); only owners and members run commands, and each command
run is logged with who ran it where (never its output).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
from aiohttp import web

from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import DEPS, base_url
from corral.apiserver.http import envelope
from corral.apiserver.http.body import read_json
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.services import workloads
from corral.apiserver.services.workloads import Scope
from corral.apiserver.state import downstream
from corral.core import errors, logs
from corral.core.api.ids import ScopedId
from corral.core.kube import podexec
from corral.core.kube.informer import Informer, Obj
from corral.core.workloads.kinds import KINDS

log = logging.getLogger(__name__)

SCHEMA = Schema(
    id="pod",
    plural="pods",
    fields={
        "name": readonly("string"),
        "namespaceId": readonly("reference[namespace]"),
        "projectId": readonly("reference[project]"),
        "workloadId": readonly("reference[workload]"),
        "nodeId": readonly("string"),
        "state": readonly("enum", "pending, running, succeeded, failed, unknown or removing"),
        "containers": readonly("array[containerStatus]"),
        "hostIp": readonly("string"),
        "podIp": readonly("string"),
        "labels": readonly("map[string]"),
        "annotations": readonly("map[string]"),
    },
    resource_actions={"execute": {"input": "podExecInput", "output": "podExecOutput"}},
    parent="project",
)
EXEC_INPUT = Schema(
    id="podExecInput",
    plural="podExecInputs",
    fields={
        "command": Field("array[string]", create=True, required=True),
        "container": Field("string", create=True),
        "timeout": Field("int", create=True, default=60, description="seconds, 1 to 300"),
    },
    embedded=True,
)
EXEC_OUTPUT = Schema(
    id="podExecOutput",
    plural="podExecOutputs",
    fields={
        "stdout": readonly("string"),
        "stderr": readonly("string"),
        "exitCode": readonly("int"),
        "truncated": readonly("boolean", f"output beyond {1 << 20} bytes a stream was cut"),
    },
    embedded=True,
)
PODS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:pods)}"
MAX_EXEC_OUTPUT = 1 << 20
MAX_COMMAND_WORDS = 256
# The command travels in the exec request's URL, which kube-apiserver bounds.
MAX_COMMAND_BYTES = 64 * 1024
# Bounds of the log options (Kubernetes takes larger ones; nobody needs them through /v3).
MAX_TAIL_LINES = 100_000
MAX_SINCE_SECONDS = 366 * 24 * 3600
MAX_LOG_BYTES = 64 << 20
# What a log that is not followed may take before Kubernetes cuts it.
DEFAULT_LOG_BYTES = 10 << 20

routes = web.RouteTableDef()


def fields(where: Scope, obj: Obj, jobs: Informer) -> dict[str, Any]:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    statuses = {c["name"]: c for c in status.get("containerStatuses") or []}
    containers = []
    for container in spec.get("containers") or []:
        seen = statuses.get(container["name"], {})
        containers.append(
            {
                "name": container["name"],
                "image": container.get("image", ""),
                "ready": bool(seen.get("ready")),
                "restartCount": seen.get("restartCount", 0),
                "state": next(iter(seen.get("state") or {}), "waiting"),
            }
        )
    phase = (status.get("phase") or "Unknown").lower()
    return {
        "id": str(ScopedId.of(obj)),
        "name": meta["name"],
        "namespaceId": meta["namespace"],
        "projectId": where.project_id,
        "workloadId": workloads.workload_of(obj, jobs),
        "nodeId": spec.get("nodeName"),
        "state": "removing" if meta.get("deletionTimestamp") else phase,
        "containers": containers,
        "hostIp": status.get("hostIP"),
        "podIp": status.get("podIP"),
        "labels": meta.get("labels") or {},
        "annotations": meta.get("annotations") or {},
        "created": meta.get("creationTimestamp", ""),
        "uuid": meta.get("uid", ""),
    }


def render(request: web.Request, where: Scope, obj: Obj, jobs: Informer) -> dict[str, Any]:
    body = fields(where, obj, jobs)
    project = f"{base_url(request)}/v3/projects/{where.project_id}"
    url = f"{project}/pods/{body['id']}"
    rendered = envelope.resource(base_url(request), SCHEMA, body)
    rendered["links"] = {"self": url, "logs": f"{url}/logs", "project": project}
    if body["workloadId"]:
        rendered["links"]["workload"] = f"{project}/workloads/{body['workloadId']}"
    rendered["actions"] = {"execute": f"{url}?action=execute"} if where.writable else {}
    return rendered


async def jobs_of(request: web.Request, where: Scope) -> Informer:
    return await workloads.cache_of(request, where, KINDS["job"])


@routes.get(PODS)
async def list_pods(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    pods = await downstream.downstream_pods(request.app[DEPS].connections, where.cluster)
    jobs = await jobs_of(request, where)
    members = await workloads.namespaces(request, where)
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        [p for namespace in members for p in pods.by_index("namespace", namespace)],
        lambda p: str(ScopedId.of(p)),
        lambda p: fields(where, p, jobs),
        lambda p: render(request, where, p, jobs),
        request.query,
        request.path,
        can_create=False,
    )
    return web.json_response(body)


@routes.get(PODS + "/{pod}")
async def get_pod(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    obj = await workloads.find_pod(request, where, request.match_info["pod"])
    return web.json_response(render(request, where, obj, await jobs_of(request, where)))


def container_of(obj: Obj, value: Any) -> str:
    """The container a request names, or the pod's only one."""
    names: list[str] = [c["name"] for c in (obj.get("spec") or {}).get("containers") or []]
    if value in (None, "") and len(names) == 1:
        return names[0]
    if value not in names:
        raise errors.invalid("container", f"container must be one of {', '.join(names)}")
    return str(value)


def _number(query: Any, name: str, low: int, high: int) -> int | None:
    text = query.get(name)
    if text is None:
        return None
    if not text.isdigit() or not low <= int(text) <= high:
        raise errors.invalid(name, f"{name} must be a whole number from {low} to {high}")
    return int(text)


def _flag(query: Any, name: str) -> bool:
    text = query.get(name, "false").lower()
    if text not in ("true", "false", "1", "0"):
        raise errors.invalid(name, f"{name} must be true or false")
    return text in ("true", "1")


def log_options(query: Any, obj: Obj) -> dict[str, str]:
    """The downstream `pods/log` query for a `/v3` one, every value checked and bounded."""
    params = {"container": container_of(obj, query.get("container"))}
    follow = _flag(query, "follow")
    for name, value in (
        ("timestamps", _flag(query, "timestamps")),
        ("follow", follow),
        ("previous", _flag(query, "previous")),
    ):
        if value:
            params[name] = "true"
    for name, high in (("tailLines", MAX_TAIL_LINES), ("sinceSeconds", MAX_SINCE_SECONDS)):
        number = _number(query, name, 0 if name == "tailLines" else 1, high)
        if number is not None:
            params[name] = str(number)
    limit = _number(query, "limitBytes", 1, MAX_LOG_BYTES)
    if limit is not None or not follow:
        params["limitBytes"] = str(limit or DEFAULT_LOG_BYTES)
    return params


@routes.get(PODS + "/{pod}/logs")
async def pod_logs(request: web.Request) -> web.StreamResponse:
    """The container's log as text, streamed; with `follow=true` until the client leaves or
    the container ends."""
    where = workloads.scope(request)
    obj = await workloads.find_pod(request, where, request.match_info["pod"])
    params = log_options(request.query, obj)
    connection = await request.app[DEPS].connections.connection(where.cluster)
    meta = obj["metadata"]
    url = connection.credential.url(
        "api", "v1", "namespaces", meta["namespace"], "pods", meta["name"], "log"
    )
    try:
        upstream = await connection.session().get(url, params=params, headers=where.who.headers())
    except (aiohttp.ClientError, OSError) as exc:
        raise ApiError(
            503, "ClusterUnavailable", f"cannot reach cluster {where.cluster}: {exc}"
        ) from None
    async with upstream:
        if upstream.status != 200:
            raise await _refused(upstream, "read the log of", obj)
        response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, ConnectionResetError):
            log.debug("log stream of pod %s ended early", ScopedId.of(obj))
        await response.write_eof()
        return response


async def _refused(upstream: aiohttp.ClientResponse, what: str, obj: Obj) -> ApiError:
    """The cluster's refusal as our error body: its message, at most a little of it."""
    text = (await upstream.content.read(4096)).decode(errors="replace")
    try:
        message = json.loads(text).get("message") or text
    except (ValueError, AttributeError):
        message = text
    status = upstream.status if upstream.status in (400, 404) else 502
    code = {400: "BadRequest", 404: "NotFound"}.get(status, "ClusterError")
    return ApiError(status, code, f"cannot {what} pod {ScopedId.of(obj)}: {message}")


@routes.post(PODS + "/{pod}")
async def pod_action(request: web.Request) -> web.Response:
    where = workloads.scope(request)
    obj = await workloads.find_pod(request, where, request.match_info["pod"])
    if action(request, {"execute"}) is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a pod needs ?action=execute")
    where.require_write("run commands in pods")
    body = await read_json(request)
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
    container = container_of(obj, body.get("container"))
    timeout = body.get("timeout", EXEC_INPUT.fields["timeout"].default)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 300:
        raise errors.invalid("timeout", "timeout must be a whole number of seconds, 1 to 300")
    meta = obj["metadata"]
    # The audit record: who ran what, where. Never the output, which may hold anything.
    log.info(
        "exec: user %s runs %s in pod %s/%s container %s of cluster %s",
        principal(request).user_id,
        logs.words(command)[:2048],
        meta["namespace"],
        meta["name"],
        container,
        where.cluster,
    )
    connection = await request.app[DEPS].connections.connection(where.cluster)
    result = await podexec.execute(
        connection,
        meta["namespace"],
        meta["name"],
        container,
        command,
        timeout=timeout,
        limit=MAX_EXEC_OUTPUT,
        who=where.who,
    )
    log.info(
        "exec: user %s in pod %s/%s exited %d",
        principal(request).user_id,
        meta["namespace"],
        meta["name"],
        result.exit_code,
    )
    return web.json_response(
        {
            "type": "podExecOutput",
            "stdout": result.stdout,
            "stderr": result.stderr,
            "exitCode": result.exit_code,
            "truncated": result.truncated,
        }
    )
