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

from corral.apiserver.http.body import read_input
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.query import action
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.resources.subscriptions import InProject
from corral.apiserver.services import pods, workloads
from corral.apiserver.services.pods import DEFAULT_EXEC_TIMEOUT, MAX_EXEC_OUTPUT, Pod, container_of
from corral.apiserver.state.changes import Change
from corral.apiserver.state.downstream import PODS_CACHE
from corral.core import errors
from corral.core.api.ids import ScopedId
from corral.core.kube.informer import Obj

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
        "timeout": Field(
            "int", create=True, default=DEFAULT_EXEC_TIMEOUT, description="seconds, 1 to 300"
        ),
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
        "truncated": readonly("boolean", f"output beyond {MAX_EXEC_OUTPUT} bytes a stream was cut"),
    },
    embedded=True,
)
PODS = "/v3/{projects:(?i:projects)}/{project}/{type:(?i:pods)}"
# Bounds of the log options (Kubernetes takes larger ones; nobody needs them through /v3).
MAX_TAIL_LINES = 100_000
MAX_SINCE_SECONDS = 366 * 24 * 3600
MAX_LOG_BYTES = 64 << 20
# What a log that is not followed may take before Kubernetes cuts it.
DEFAULT_LOG_BYTES = 10 << 20


def fields(ask: Ask, pod: Pod) -> dict[str, Any]:
    obj = pod.obj
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
        "projectId": pod.where.project_id,
        "workloadId": workloads.workload_of(obj, pod.jobs),
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


def project_url(ask: Ask) -> str:
    return f"{ask.base}/v3/projects/{ask.path['project']}"


def url(ask: Ask, pod: Pod) -> str:
    return f"{project_url(ask)}/pods/{ScopedId.of(pod.obj)}"


def links(ask: Ask, pod: Pod) -> dict[str, str]:
    shown = {"logs": f"{url(ask, pod)}/logs", "project": project_url(ask)}
    if workload := workloads.workload_of(pod.obj, pod.jobs):
        shown["workload"] = f"{project_url(ask)}/workloads/{workload}"
    return shown


def may_execute(pod: Pod) -> None:
    pod.where.require_write("run commands in pods")


FAMILY = Family[Pod](
    schema=SCHEMA,
    listed=lambda ask: pods.visible(ask.deps, ask.who, ask.path["project"]),
    find=lambda ask, pid: pods.find(ask.deps, ask.who, ask.path["project"], pid),
    fields=fields,
    ident=lambda pod: str(ScopedId.of(pod.obj)),
    url=url,
    links=links,
    actions=lambda ask, pod: ("execute",),
    before_action=lambda ask, pod, name: may_execute(pod),
    collection=PODS,
    within=lambda ask: f"project {ask.path['project']}",
)
routes = handlers.routes(FAMILY)


async def _changed(ask: Ask, change: Change) -> tuple[str, Pod] | None:
    found = await pods.changed(ask.deps, ask.who, change.cluster, change.obj)
    return None if found is None else (found.where.project_id, found)


# `GET /v3/subscribe`: a pod's changes go to whoever has a role in its namespace's project, as
# `find`; from the first time its cluster's pods are read (`state.downstream`).
SUBSCRIBABLE = InProject(FAMILY, caches=frozenset({PODS_CACHE}), found=_changed)


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


@routes.get(PODS + "/{id}/logs")
async def pod_logs(request: web.Request) -> web.StreamResponse:
    """The container's log as text, streamed; with `follow=true` until the client leaves or
    the container ends."""
    asked, pod = await handlers.found(FAMILY, request)
    obj, where = pod.obj, pod.where
    params = log_options(request.query, obj)
    connection = await asked.deps.connections.connection(where.cluster)
    meta = obj["metadata"]
    url = connection.credential.url(
        "api", "v1", "namespaces", meta["namespace"], "pods", meta["name"], "log"
    )
    try:
        upstream = await connection.session().get(url, params=params, headers=where.who.headers())
    except (aiohttp.ClientError, OSError) as exc:
        raise errors.Unavailable(f"cannot reach cluster {where.cluster}: {exc}") from None
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
    # The cluster's RBAC judged the caller (the request impersonates them): its refusal is
    # theirs to see as one, not a fault of the cluster.
    status = upstream.status if upstream.status in (400, 403, 404) else 502
    code = {400: "BadRequest", 403: "PermissionDenied", 404: "NotFound"}.get(status, "ClusterError")
    return ApiError(status, code, f"cannot {what} pod {ScopedId.of(obj)}: {message}")


@routes.post(PODS + "/{id}")
async def pod_action(request: web.Request) -> web.Response:
    asked, pod = await handlers.found(FAMILY, request)
    if action(request, {"execute"}) is None:
        raise errors.Unsupported("POST on a pod needs ?action=execute")
    may_execute(pod)
    body = await read_input(request, EXEC_INPUT)
    result = await pods.execute(asked.deps, asked.who, pod, body)
    return json_response(
        {
            "type": "podExecOutput",
            "stdout": result.stdout,
            "stderr": result.stderr,
            "exitCode": result.exit_code,
            "truncated": result.truncated,
        }
    )
