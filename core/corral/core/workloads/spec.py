"""The flat `/v3` workload written onto a Kubernetes object, with every value checked.

A create builds the object; a PUT merges into the stored one: only the fields the body gives
change, containers are matched by name and keep what corral does not model (probes, …), and
nothing else of the object is touched.

A field the body gives is either written or refused with 422 naming it, never dropped: the pod
fields that decide what a pod may do to its node (`hostNetwork`, `securityContext`, …) pass
through as Kubernetes takes them, so the namespace's Pod Security level judges them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from corral.core.api.ids import is_dns_label, is_dns_subdomain
from corral.core.errors import Invalid, unknown
from corral.core.quantity import amount
from corral.core.workloads.kinds import CRON_JOB, JOB, STATEFUL_SET, Kind, Obj, selector_label

# The scale no setting can raise; the setting `workload-max-scale` bounds it lower.
MAX_SCALE = 10_000
# Kubernetes stores an object of up to 1.5 MiB (etcd's request limit). Every pod a workload
# makes carries a copy of its pod template, so corral takes a template of at most 128 KiB
# (far above what charts write): pods times template stays within what a cluster holds.
MAX_TEMPLATE_BYTES = 128 * 1024
MAX_CONTAINERS = 32
MAX_ITEMS = 256  # ports, env entries, mounts, volumes, tolerations, command and args words
MAX_TEXT = 4096
PROTOCOLS = ("TCP", "UDP", "SCTP")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
ENV_SOURCES = ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef")
# Volume sources a workload may name: Kubernetes' own (it checks their insides).
VOLUME_SOURCES = (
    "hostPath",
    "emptyDir",
    "configMap",
    "secret",
    "persistentVolumeClaim",
    "projected",
    "downwardAPI",
    "nfs",
    "csi",
    "ephemeral",
    "iscsi",
    "image",
)
TOLERATION_OPERATORS = ("Exists", "Equal")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# The container fields of spec 2.8: written from the body, shown back.
CONTAINER_FIELDS = (
    "name",
    "image",
    "imagePullPolicy",
    "ports",
    "resources",
    "env",
    "volumeMounts",
    "command",
    "args",
    "securityContext",
)
# Pod fields taken as Kubernetes takes them (as Rancher's flat workload does), shown back.
POD_FLAGS = ("hostNetwork", "hostPID", "hostIPC")
POD_NAMES = ("serviceAccountName", "nodeName")
POD_FIELDS = (*POD_FLAGS, "securityContext", *POD_NAMES)
# What a body may carry besides: the fields of spec 2.8 corral writes, and those a GET shows
# that cannot be written (a client may send back what it read; they are ignored).
WRITTEN = ("name", "namespaceId", "workloadType", "labels", "annotations", "scale", "schedule",
           "containers", "volumes", "volumeClaimTemplates", "scheduling", *POD_FIELDS)  # fmt: skip
SHOWN = ("id", "type", "baseType", "links", "actions", "state", "status", "paused",
         "publicEndpoints", "projectId", "created", "createdTS", "creatorId", "uuid",
         "transitioning", "transitioningMessage")  # fmt: skip


def build(kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> Obj:
    """The object a create makes."""
    if body.get("containers") is None:
        raise Invalid("containers is required: at least one, with name and image", "containers")
    selector = selector_label(kind, namespace, name)
    template: Obj = {"metadata": {"labels": dict(selector)}, "spec": {"containers": []}}
    if kind.type in (JOB, CRON_JOB):
        template["spec"]["restartPolicy"] = "Never"
    spec: Obj = {}
    if kind.type == CRON_JOB:
        if body.get("schedule") is None:
            raise Invalid("schedule is required for a cronJob", "schedule")
        spec["jobTemplate"] = {"spec": {"template": template}}
    else:
        spec["template"] = template
    if kind.type not in (JOB, CRON_JOB):
        spec["selector"] = {"matchLabels": dict(selector)}
    if kind.scalable:
        spec["replicas"] = 1
    if kind.type == STATEFUL_SET:
        spec["serviceName"] = name
    obj: Obj = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return merge(kind, obj, body)


def merge(kind: Kind, stored: Obj, body: Mapping[str, Any]) -> Obj:
    """A copy of `stored` with the fields `body` gives written onto it."""
    _check_known(body, (*WRITTEN, *SHOWN), "")
    obj = copy.deepcopy(stored)
    meta, spec = obj["metadata"], obj.setdefault("spec", {})
    if meta.get("resourceVersion"):
        _check_mutable(kind, body)
    template = _template(kind, spec)
    pod = template.setdefault("spec", {})
    for field in ("labels", "annotations"):
        if body.get(field) is not None:
            meta[field] = string_map(body[field], field)
    if body.get("scale") is not None:
        if not kind.scalable:
            raise Invalid(f"scale does not apply to a {kind.type}", "scale")
        spec["replicas"] = bounded_int(body["scale"], "scale", 0, MAX_SCALE)
    if body.get("schedule") is not None:
        if kind.type != CRON_JOB:
            raise Invalid(f"schedule applies to a cronJob, not a {kind.type}", "schedule")
        spec["schedule"] = _schedule(body["schedule"])
    if body.get("containers") is not None:
        pod["containers"] = _containers(body["containers"], pod.get("containers") or [])
    if body.get("volumes") is not None:
        pod["volumes"] = _volumes(body["volumes"])
    if body.get("volumeClaimTemplates") is not None:
        if kind.type != STATEFUL_SET:
            raise Invalid("volumeClaimTemplates apply to a statefulSet", "volumeClaimTemplates")
        spec["volumeClaimTemplates"] = _claim_templates(body["volumeClaimTemplates"])
    if body.get("scheduling") is not None:
        _scheduling(body["scheduling"], pod)
    _pod_fields(body, pod)
    return obj


def check_bounds(kind: Kind, obj: Obj, max_scale: int) -> None:
    """Invalid when the workload would make more pods than `max_scale`, or pods larger than
    `MAX_TEMPLATE_BYTES` each."""
    replicas = (obj.get("spec") or {}).get("replicas")
    if kind.scalable and isinstance(replicas, int) and replicas > max_scale:
        raise Invalid(
            f"scale must be at most {max_scale} (the setting workload-max-scale)",
            "scale",
            code="MaxLimitExceeded",
        )
    size = len(json.dumps(kind.pod_template(obj), separators=(",", ":")).encode())
    if size > MAX_TEMPLATE_BYTES:
        raise Invalid(
            f"the pod template is {size} bytes; at most {MAX_TEMPLATE_BYTES} are taken, as "
            "every pod carries a copy (large data belongs in a ConfigMap or Secret)",
            "containers",
            code="MaxLimitExceeded",
        )


def _check_known(given: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    for field in given:
        if field not in known:
            raise unknown(f"{where}{field}", "a workload corral writes")


def _pod_fields(body: Mapping[str, Any], pod: Obj) -> None:
    for field in POD_FLAGS:
        if body.get(field) is not None:
            pod[field] = flag(body[field], field)
    if body.get("securityContext") is not None:
        pod["securityContext"] = mapping(body["securityContext"], "securityContext")
    for field in POD_NAMES:
        if body.get(field) == "":  # as a GET shows it unset
            pod.pop(field, None)
        elif body.get(field) is not None:
            pod[field] = dns_subdomain(body[field], field)


def _check_mutable(kind: Kind, body: Mapping[str, Any]) -> None:
    """What Kubernetes never lets change once made, refused in a sentence of our own."""
    if kind.type == JOB:
        for field in ("containers", "volumes", "scheduling", *POD_FIELDS):
            if body.get(field) is not None:
                raise Invalid(
                    f"a job's pods cannot change once it exists ({field}): "
                    "delete it and create it again",
                    field,
                )
    if kind.type == STATEFUL_SET and body.get("volumeClaimTemplates") is not None:
        raise Invalid(
            "a statefulSet's volumeClaimTemplates cannot change once it exists",
            "volumeClaimTemplates",
        )


def _template(kind: Kind, spec: Obj) -> Obj:
    if kind.type == CRON_JOB:
        spec = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
    template: Obj = spec.setdefault("template", {})
    return template


# -- values -------------------------------------------------------------------------------------


def items(value: Any, field: str, limit: int = MAX_ITEMS) -> list[Any]:
    if not isinstance(value, list):
        raise Invalid(f"{field} must be a list", field)
    if len(value) > limit:
        raise Invalid(f"{field} may hold at most {limit} entries", field)
    return value


def mapping(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(f"{field} must be an object", field)
    return value


def string(value: Any, field: str, required: bool = True, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or (required and not value):
        raise Invalid(f"{field} must be {'non-empty ' if required else ''}text", field)
    if len(value) > limit:
        raise Invalid(f"{field} may be at most {limit} characters", field)
    return value


def bounded_int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Invalid(f"{field} must be a whole number from {low} to {high}", field)
    return value


def string_map(value: Any, field: str) -> dict[str, str]:
    given = mapping(value, field)
    if len(given) > MAX_ITEMS:
        raise Invalid(f"{field} may hold at most {MAX_ITEMS} entries", field)
    for key, text in given.items():
        string(key, f"{field} key", limit=317)
        string(text, f"{field}.{key}", required=False)
    return dict(given)


def strings(value: Any, field: str) -> list[str]:
    return [string(v, f"{field}[{i}]", required=False) for i, v in enumerate(items(value, field))]


def flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{field} must be true or false", field)
    return value


def dns_subdomain(value: Any, field: str) -> str:
    if not isinstance(value, str) or not is_dns_subdomain(value):
        raise Invalid(
            f"{field} must be a DNS subdomain (lower-case letters, digits, '-', '.')", field
        )
    return value


def dns_label(value: Any, field: str) -> str:
    if not isinstance(value, str) or not is_dns_label(value):
        raise Invalid(f"{field} must be a DNS label (lower-case letters, digits, '-')", field)
    return value


# -- containers ---------------------------------------------------------------------------------


def _containers(value: Any, stored: list[Obj]) -> list[Obj]:
    given = items(value, "containers", MAX_CONTAINERS)
    if not given:
        raise Invalid("containers must hold at least one container", "containers")
    by_name = {c.get("name"): c for c in stored}
    result, seen = [], set()
    for i, entry in enumerate(given):
        where = f"containers[{i}]"
        entry = mapping(entry, where)
        _check_known(entry, CONTAINER_FIELDS, f"{where}.")
        name = dns_label(entry.get("name"), f"{where}.name")
        if name in seen:
            raise Invalid(f"two containers are named {name}", f"{where}.name")
        seen.add(name)
        container = copy.deepcopy(by_name.get(name, {}))
        container["name"] = name
        _container(entry, container, where)
        if not container.get("image"):
            raise Invalid(f"{where}.image is required", f"{where}.image")
        result.append(container)
    return result


def _container(entry: Obj, container: Obj, where: str) -> None:
    if entry.get("image") is not None:
        image = string(entry["image"], f"{where}.image", limit=1024)
        if any(c.isspace() for c in image):
            raise Invalid(f"{where}.image may not contain spaces", f"{where}.image")
        container["image"] = image
    if entry.get("imagePullPolicy") is not None:
        if entry["imagePullPolicy"] not in PULL_POLICIES:
            raise Invalid(
                f"{where}.imagePullPolicy must be one of {', '.join(PULL_POLICIES)}",
                f"{where}.imagePullPolicy",
            )
        container["imagePullPolicy"] = entry["imagePullPolicy"]
    if entry.get("ports") is not None:
        container["ports"] = [
            _port(p, f"{where}.ports[{i}]")
            for i, p in enumerate(items(entry["ports"], f"{where}.ports"))
        ]
    if entry.get("resources") is not None:
        container["resources"] = resources(entry["resources"], f"{where}.resources")
    if entry.get("env") is not None:
        container["env"] = [
            env_var(e, f"{where}.env[{i}]")
            for i, e in enumerate(items(entry["env"], f"{where}.env"))
        ]
    if entry.get("volumeMounts") is not None:
        mounts = items(entry["volumeMounts"], f"{where}.volumeMounts")
        container["volumeMounts"] = [
            _mount(m, f"{where}.volumeMounts[{i}]") for i, m in enumerate(mounts)
        ]
    for field in ("command", "args"):
        if entry.get(field) is not None:
            container[field] = strings(entry[field], f"{where}.{field}")
    if entry.get("securityContext") is not None:
        field = f"{where}.securityContext"
        container["securityContext"] = mapping(entry["securityContext"], field)


def _port(value: Any, where: str) -> Obj:
    entry = mapping(value, where)
    _check_known(entry, ("containerPort", "protocol", "name"), f"{where}.")
    port: Obj = {
        "containerPort": bounded_int(entry.get("containerPort"), f"{where}.containerPort", 1, 65535)
    }
    protocol = entry.get("protocol")
    protocol = "TCP" if protocol in (None, "") else protocol
    if protocol not in PROTOCOLS:
        field = f"{where}.protocol"
        raise Invalid(f"{field} must be one of {', '.join(PROTOCOLS)}", field)
    port["protocol"] = protocol
    if entry.get("name") not in (None, ""):
        name = string(entry["name"], f"{where}.name", limit=15)
        port["name"] = dns_label(name, f"{where}.name")
    return port


def resources(value: Any, where: str) -> Obj:
    given = mapping(value, where)
    _check_known(given, ("requests", "limits"), f"{where}.")
    resources: Obj = {}
    for part in ("requests", "limits"):
        if given.get(part) is None:
            continue
        amounts = mapping(given[part], f"{where}.{part}")
        for resource in amounts:
            if resource not in ("cpu", "memory"):
                raise Invalid(f"{where}.{part} takes cpu and memory", f"{where}.{part}")
        resources[part] = {
            r: amount(v, f"{where}.{part}.{r}") for r, v in amounts.items() if v is not None
        }
    return resources


def env_var(value: Any, where: str) -> Obj:
    """One EnvVar: `name` and `value`, or `name` and `valueFrom` with exactly one source."""
    entry = mapping(value, where)
    _check_known(entry, ("name", "value", "valueFrom"), f"{where}.")
    env: Obj = {"name": string(entry.get("name"), f"{where}.name", limit=256)}
    if entry.get("valueFrom") is not None:
        if entry.get("value") is not None:
            raise Invalid(f"{where} takes value or valueFrom, not both", where)
        source = mapping(entry["valueFrom"], f"{where}.valueFrom")
        kinds = [k for k in ENV_SOURCES if source.get(k) is not None]
        if len(kinds) != 1 or len(source) != 1:
            raise Invalid(
                f"{where}.valueFrom takes exactly one of {', '.join(ENV_SOURCES)}",
                f"{where}.valueFrom",
            )
        ref = mapping(source[kinds[0]], f"{where}.valueFrom.{kinds[0]}")
        if kinds[0] in ("secretKeyRef", "configMapKeyRef"):
            for part in ("name", "key"):
                string(ref.get(part), f"{where}.valueFrom.{kinds[0]}.{part}", limit=253)
        env["valueFrom"] = {kinds[0]: dict(ref)}
    else:
        env["value"] = string(entry.get("value", ""), f"{where}.value", required=False)
    return env


def _mount(value: Any, where: str) -> Obj:
    entry = mapping(value, where)
    _check_known(entry, ("name", "mountPath", "readOnly", "subPath"), f"{where}.")
    path = string(entry.get("mountPath"), f"{where}.mountPath")
    if not path.startswith("/"):
        raise Invalid(f"{where}.mountPath must be an absolute path", f"{where}.mountPath")
    mount: Obj = {"name": dns_label(entry.get("name"), f"{where}.name"), "mountPath": path}
    if entry.get("readOnly") is not None:
        if not isinstance(entry["readOnly"], bool):
            raise Invalid(f"{where}.readOnly must be true or false", f"{where}.readOnly")
        mount["readOnly"] = entry["readOnly"]
    if entry.get("subPath"):
        mount["subPath"] = string(entry["subPath"], f"{where}.subPath")
    return mount


# -- pod spec parts ---------------------------------------------------------------------------


def _volumes(value: Any) -> list[Obj]:
    result, seen = [], set()
    for i, entry in enumerate(items(value, "volumes")):
        where = f"volumes[{i}]"
        entry = mapping(entry, where)
        name = dns_label(entry.get("name"), f"{where}.name")
        if name in seen:
            raise Invalid(f"two volumes are named {name}", f"{where}.name")
        seen.add(name)
        sources = [k for k in entry if k != "name"]
        if len(sources) != 1 or sources[0] not in VOLUME_SOURCES:
            raise Invalid(
                f"{where} takes a name and exactly one source: {', '.join(VOLUME_SOURCES)}", where
            )
        result.append({"name": name, sources[0]: mapping(entry[sources[0]], where)})
    return result


def _claim_templates(value: Any) -> list[Obj]:
    result = []
    for i, entry in enumerate(items(value, "volumeClaimTemplates")):
        where = f"volumeClaimTemplates[{i}]"
        entry = mapping(entry, where)
        _check_known(entry, ("name", "spec"), f"{where}.")
        spec = mapping(entry.get("spec"), f"{where}.spec")
        _check_known(spec, ("accessModes", "resources", "storageClassName"), f"{where}.spec.")
        modes = strings(spec.get("accessModes", []), f"{where}.spec.accessModes")
        resources = mapping(spec.get("resources", {}), f"{where}.spec.resources")
        _check_known(resources, ("requests",), f"{where}.spec.resources.")
        requests = mapping(resources.get("requests", {}), f"{where}.spec.resources.requests")
        _check_known(requests, ("storage",), f"{where}.spec.resources.requests.")
        storage = requests.get("storage")
        claim: Obj = {
            "accessModes": modes,
            "resources": {
                "requests": {"storage": amount(storage, f"{where}.spec.resources.requests.storage")}
            },
        }
        if spec.get("storageClassName") is not None:
            field = f"{where}.spec.storageClassName"
            claim["storageClassName"] = string(spec["storageClassName"], field, limit=253)
        name = dns_label(entry.get("name"), f"{where}.name")
        result.append({"metadata": {"name": name}, "spec": claim})
    return result


def _schedule(value: Any) -> str:
    schedule = string(value, "schedule", limit=256)
    if not schedule.startswith("@") and len(schedule.split()) not in (5, 6):
        raise Invalid("schedule must be a cron expression such as '*/5 * * * *'", "schedule")
    return schedule


def _scheduling(value: Any, pod: Obj) -> None:
    given = mapping(value, "scheduling")
    _check_known(given, ("node", "tolerations", "affinity"), "scheduling.")
    node = given.get("node")
    if node is not None:
        _check_known(mapping(node, "scheduling.node"), ("nodeSelector",), "scheduling.node.")
        selector = mapping(node, "scheduling.node").get("nodeSelector")
        if selector is not None:
            pod["nodeSelector"] = string_map(selector, "scheduling.node.nodeSelector")
    if given.get("tolerations") is not None:
        pod["tolerations"] = [
            toleration(t, f"scheduling.tolerations[{i}]")
            for i, t in enumerate(items(given["tolerations"], "scheduling.tolerations"))
        ]
    if given.get("affinity") is not None:
        pod["affinity"] = mapping(given["affinity"], "scheduling.affinity")


def toleration(value: Any, where: str) -> Obj:
    entry = mapping(value, where)
    _check_known(entry, ("key", "value", "operator", "effect", "tolerationSeconds"), f"{where}.")
    toleration: Obj = {}
    for part in ("key", "value"):
        if entry.get(part) is not None:
            toleration[part] = string(entry[part], f"{where}.{part}", required=False, limit=317)
    for part, allowed in (("operator", TOLERATION_OPERATORS), ("effect", TAINT_EFFECTS)):
        if entry.get(part) is not None:
            if entry[part] not in allowed:
                raise Invalid(
                    f"{where}.{part} must be one of {', '.join(allowed)}", f"{where}.{part}"
                )
            toleration[part] = entry[part]
    if entry.get("tolerationSeconds") is not None:
        field = f"{where}.tolerationSeconds"
        toleration["tolerationSeconds"] = bounded_int(
            entry["tolerationSeconds"], field, 0, 2**31 - 1
        )
    return toleration
