"""The five workload kinds behind one `/v3` workload, and the workload id
`<workloadType>:<namespace>:<name>` (spec 2.8), read and written here only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.api.ids import MAX_LABEL, is_dns_label
from corral.core.errors import Invalid

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    type: str  # the `/v3` workloadType
    group: str
    version: str
    kind: str
    plural: str
    scalable: bool  # has `scale` (spec.replicas)
    rolls_out: bool  # redeploy applies: a new pod template makes new pods
    max_name: int  # pods and jobs get names built from it, so some kinds take shorter ones

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def pod_template(self, obj: Mapping[str, Any]) -> Obj:
        """The object's pod template (spec.template, or a CronJob's jobTemplate's)."""
        spec = obj.get("spec") or {}
        if self.type == CRON_JOB:
            spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        template: Obj = spec.get("template") or {}
        return template


DEPLOYMENT = "deployment"
STATEFUL_SET = "statefulSet"
DAEMON_SET = "daemonSet"
CRON_JOB = "cronJob"
JOB = "job"

KINDS: dict[str, Kind] = {
    k.type: k
    for k in (
        Kind(DEPLOYMENT, "apps", "v1", "Deployment", "deployments", True, True, MAX_LABEL),
        Kind(STATEFUL_SET, "apps", "v1", "StatefulSet", "statefulsets", True, True, MAX_LABEL),
        Kind(DAEMON_SET, "apps", "v1", "DaemonSet", "daemonsets", False, True, MAX_LABEL),
        # A CronJob's Jobs are named `<name>-<11 digits>`, which must fit in 63.
        Kind(CRON_JOB, "batch", "v1", "CronJob", "cronjobs", False, False, 52),
        Kind(JOB, "batch", "v1", "Job", "jobs", False, False, MAX_LABEL),
    )
}


def kind_named(workload_type: object, field: str = "workloadType") -> Kind:
    found = KINDS.get(workload_type) if isinstance(workload_type, str) else None
    if found is None:
        raise Invalid(f"{field} must be one of {', '.join(KINDS)}", field)
    return found


def check_name(name: object, kind: Kind, field: str = "name") -> str:
    if not isinstance(name, str) or len(name) > kind.max_name or not is_dns_label(name):
        raise Invalid(
            f"{field} must be at most {kind.max_name} lower-case letters, digits or '-', "
            "starting and ending with a letter or digit",
            field,
        )
    return name


@dataclass(frozen=True)
class WorkloadId:
    kind: Kind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind.type}:{self.namespace}:{self.name}"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, kind: Kind, obj: Mapping[str, Any]) -> WorkloadId:
        meta = obj["metadata"]
        return cls(kind, meta["namespace"], meta["name"])

    @classmethod
    def parse(cls, text: object, field: str = "id") -> WorkloadId:
        parts = text.split(":") if isinstance(text, str) else []
        if len(parts) != 3:
            raise Invalid(f"{field} must be of the form <workloadType>:<namespace>:<name>", field)
        kind = kind_named(parts[0], field)
        if not is_dns_label(parts[1]):
            raise Invalid(f"the namespace in {field} must be a DNS label", field)
        return cls(kind, parts[1], check_name(parts[2], kind, field))


def selector_label(kind: Kind, namespace: str, name: str) -> dict[str, str]:
    """The label corral puts on a workload's pods and selects them by: one per workload, so
    two workloads never select each other's pods."""
    value = f"{kind.type.lower()}-{namespace}-{name}"
    if len(value) > MAX_LABEL:  # a label value holds 63: keep a readable start, then a hash
        digest = hashlib.sha256(value.encode()).hexdigest()[:10]
        value = f"{value[: MAX_LABEL - 11].rstrip('-')}-{digest}"
    return {SELECTOR_LABEL: value}


SELECTOR_LABEL = "workload.svc.io/workloadselector"
# Set on a pod template to roll its pods without any other change (`redeploy`).
REDEPLOYED_AT = "workload.svc.io/redeployedAt"
