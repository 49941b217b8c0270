"""The workload kinds as lightkube types that keep objects as they are: a PUT of a workload
must carry back every field, including those newer than lightkube's models."""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import create_namespaced_resource

from corral.core.workloads.kinds import KINDS

RESOURCES: dict[str, Any] = {
    k.type: create_namespaced_resource(k.group, k.version, k.kind, k.plural) for k in KINDS.values()
}
