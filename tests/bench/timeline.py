"""Where a provisioned cluster's time goes from POST to Ready, read after the fact from what the
system records anyway: the operator's log lines about the cluster (millisecond timestamps), the
creation times of the objects it made, the kubelet's and scheduler's events, the pods'
conditions and containers' start times, and the Cluster's own conditions. Kubernetes keeps most
of these to the second, so the timeline is as fine as that."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

# The operator's log format (corral.operator.main): "2026-11-28 19:10:01,123 INFO name message".
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ [\w.]+ (.*)$")
Milestone = tuple[float, str]


def kube_time(value: Any) -> float | None:
    """A Kubernetes timestamp (as the client parses it, or as a string) in seconds since the
    epoch."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return float(value.timestamp())


def operator_lines(log: Path, cluster: str) -> Iterator[Milestone]:
    """The first time each distinct message about `cluster` was logged. The operator logs in
    local time, as `datetime.timestamp` reads a naive time."""
    prefix = f"cluster {cluster}: "
    seen: set[str] = set()
    for line in log.read_text(errors="replace").splitlines():
        found = LOG_LINE.match(line)
        if found is None or prefix not in found[2]:
            continue
        message = found[2].split(prefix, 1)[1][:90]
        if message in seen:
            continue
        seen.add(message)
        when = datetime.datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        yield when, f"operator: {message}"


def kube_milestones(api: k8s.CoreV1Api, apps: k8s.AppsV1Api, cluster: str) -> Iterator[Milestone]:
    """What the management cluster recorded of the cluster's namespace."""
    namespace = api.read_namespace(cluster)
    yield kube_time(namespace.metadata.creation_timestamp) or 0.0, "namespace created"
    secrets = api.list_namespaced_secret(cluster).items
    created = [kube_time(s.metadata.creation_timestamp) or 0.0 for s in secrets]
    if created:
        yield min(created), f"first of {len(created)} Secrets (certificates) written"
        yield max(created), "last Secret written"
    for statefulset in apps.list_namespaced_stateful_set(cluster).items:
        yield kube_time(statefulset.metadata.creation_timestamp) or 0.0, "StatefulSet etcd applied"
    for deployment in apps.list_namespaced_deployment(cluster).items:
        yield kube_time(deployment.metadata.creation_timestamp) or 0.0, "Deployment applied"
    for pod in api.list_namespaced_pod(cluster).items:
        yield from pod_milestones(pod)
    for event in api.list_namespaced_event(cluster).items:
        when = kube_time(event.event_time) or kube_time(event.first_timestamp)
        if when is None:
            continue
        what = f"{event.involved_object.kind} {event.involved_object.name}"
        count = f" (x{event.count})" if (event.count or 1) > 1 else ""
        yield when, f"event {what}: {event.reason}{count} {event.message or ''}"[:110]


def pod_milestones(pod: Any) -> Iterator[Milestone]:
    name = pod.metadata.name
    yield kube_time(pod.metadata.creation_timestamp) or 0.0, f"pod {name} created"
    for condition in pod.status.conditions or []:
        if condition.status == "True":
            when = kube_time(condition.last_transition_time)
            yield when or 0.0, f"pod {name} {condition.type}"
    for status in pod.status.container_statuses or []:
        running = status.state.running if status.state else None
        if running is not None:
            restarts = f" (restarts {status.restart_count})" if status.restart_count else ""
            started = kube_time(running.started_at) or 0.0
            yield started, f"pod {name} container {status.name} started{restarts}"


def pod_state(pod: Any) -> str:
    """What a pod is doing now: its phase, the conditions not yet True, and each container's
    state (the apiserver is a sidecar, among the init containers)."""
    status = pod.status
    said = [f"pod {pod.metadata.name} {status.phase} on {pod.spec.node_name or 'no node'}"]
    for condition in status.conditions or []:
        if condition.status != "True":
            said.append(f"{condition.type} {condition.status} {condition.reason or ''} "
                        f"{condition.message or ''}".strip())  # fmt: skip
    containers = [*(status.init_container_statuses or []), *(status.container_statuses or [])]
    for container in containers:
        state = container.state
        if state.running is not None:
            now = "ready" if container.ready else "running, not ready"
        elif state.waiting is not None:
            now = f"waiting {state.waiting.reason} {state.waiting.message or ''}".strip()
        else:
            now = f"terminated {state.terminated.reason} (exit {state.terminated.exit_code})"
        last = container.last_state.terminated if container.last_state else None
        if last is not None:
            now += f"; last exit {last.exit_code} {last.reason or ''} {last.message or ''}"[:160]
        said.append(f"{container.name}: {now} (restarts {container.restart_count})")
    return "; ".join(said)


def cluster_milestones(body: dict[str, Any]) -> Iterator[Milestone]:
    """The Cluster's conditions as they stand, by when each last changed."""
    for condition in (body.get("status") or {}).get("conditions") or []:
        when = kube_time(condition.get("lastTransitionTime"))
        if when is not None and condition.get("status") == "True":
            yield when, f"Cluster condition {condition['type']} True"


def render(posted: float, milestones: list[Milestone]) -> str:
    """The milestones in time order, in seconds after the POST."""
    lines = [f"  {when - posted:+7.2f} s  {what}" for when, what in sorted(milestones)]
    return "\n".join(lines)
