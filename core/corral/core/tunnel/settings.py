"""A cluster's agent settings (spec 2.3), checked as Kubernetes checks the core/v1 types they
become in the agent's Deployment, so that what is stored is what the cluster will take:
`agentEnvVars` (the container's `env`; corral's own variables are not the user's to set) and
`clusterAgentDeploymentCustomization`, as Rancher defines it: `appendTolerations` (added to
the pod's), `overrideAffinity` (the pod's affinity) and `overrideResourceRequirements` (the
container's resources). A value Kubernetes would refuse is `Invalid` naming its field.
"""

from __future__ import annotations

from typing import Any

from corral.core.errors import Invalid, unknown
from corral.core.quantity import parse
from corral.core.workloads.spec import (
    bounded_int,
    env_var,
    items,
    mapping,
    resources,
    string,
    string_map,
    toleration,
)

AGENT_ENV = "agentEnvVars"
CUSTOMIZATION = "clusterAgentDeploymentCustomization"
MAX_ENV = 64
# The agent's own configuration (docs/design/cluster-agent.md, section 4).
RESERVED_PREFIX = "CORRAL_"
MAX_TOLERATIONS = 32
# Terms, expressions and values of an affinity: far above what a scheduling rule needs.
MAX_TERMS = 16
MAX_EXPRESSIONS = 16
MAX_VALUES = 64
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
CUSTOMIZATION_FIELDS = ("appendTolerations", "overrideAffinity", "overrideResourceRequirements")


def agent_env(value: Any) -> list[dict[str, Any]]:
    env = items(value, AGENT_ENV, MAX_ENV)
    checked = [env_var(entry, f"{AGENT_ENV}[{i}]") for i, entry in enumerate(env)]
    for i, entry in enumerate(checked):
        if entry["name"].startswith(RESERVED_PREFIX):
            field = f"{AGENT_ENV}[{i}].name"
            raise Invalid(f"{field}: {RESERVED_PREFIX}* variables are the agent's own", field)
        if "=" in entry["name"]:
            raise Invalid(f"{AGENT_ENV}[{i}].name may not contain '='", f"{AGENT_ENV}[{i}].name")
    return checked


def customization(value: Any) -> dict[str, Any]:
    given = mapping(value, CUSTOMIZATION)
    for key in given:
        if key not in CUSTOMIZATION_FIELDS:
            raise unknown(f"{CUSTOMIZATION}.{key}", CUSTOMIZATION)
    checked: dict[str, Any] = {}
    if given.get("appendTolerations") is not None:
        where = f"{CUSTOMIZATION}.appendTolerations"
        tolerations = items(given["appendTolerations"], where, MAX_TOLERATIONS)
        checked["appendTolerations"] = [
            _toleration(t, f"{where}[{i}]") for i, t in enumerate(tolerations)
        ]
    if given.get("overrideAffinity") is not None:
        checked["overrideAffinity"] = _affinity(
            given["overrideAffinity"], f"{CUSTOMIZATION}.overrideAffinity"
        )
    if given.get("overrideResourceRequirements") is not None:
        where = f"{CUSTOMIZATION}.overrideResourceRequirements"
        checked["overrideResourceRequirements"] = _resources(
            given["overrideResourceRequirements"], where
        )
    return checked


def _toleration(value: Any, where: str) -> dict[str, Any]:
    checked = toleration(value, where)
    operator = checked.get("operator", "Equal")
    if not checked.get("key") and operator != "Exists":
        raise Invalid(f"{where}.operator must be Exists when the key is empty", f"{where}.operator")
    if operator == "Exists" and checked.get("value"):
        raise Invalid(f"{where}.value must be empty when the operator is Exists", f"{where}.value")
    if "tolerationSeconds" in checked and checked.get("effect") != "NoExecute":
        field = f"{where}.tolerationSeconds"
        raise Invalid(f"{field} goes only with the effect NoExecute", field)
    return checked


def _resources(value: Any, where: str) -> dict[str, Any]:
    checked = resources(value, where)
    requests, limits = checked.get("requests", {}), checked.get("limits", {})
    for resource, request in requests.items():
        if resource in limits and parse(request) > parse(limits[resource]):
            field = f"{where}.requests.{resource}"
            raise Invalid(f"{field} may not be more than its limit", field)
    return checked


def _affinity(value: Any, where: str) -> dict[str, Any]:
    given = mapping(value, where)
    for key in given:
        if key not in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
            raise unknown(f"{where}.{key}", where)
    checked: dict[str, Any] = {}
    if given.get("nodeAffinity") is not None:
        checked["nodeAffinity"] = _node_affinity(given["nodeAffinity"], f"{where}.nodeAffinity")
    for kind in ("podAffinity", "podAntiAffinity"):
        if given.get(kind) is not None:
            checked[kind] = _pod_affinity(given[kind], f"{where}.{kind}")
    return checked


def _known(given: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in given:
        if key not in known:
            raise unknown(f"{where}.{key}", where)


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _node_affinity(value: Any, where: str) -> dict[str, Any]:
    given = mapping(value, where)
    _known(given, (REQUIRED, PREFERRED), where)
    checked: dict[str, Any] = {}
    if given.get(REQUIRED) is not None:
        selector = mapping(given[REQUIRED], f"{where}.{REQUIRED}")
        _known(selector, ("nodeSelectorTerms",), f"{where}.{REQUIRED}")
        field = f"{where}.{REQUIRED}.nodeSelectorTerms"
        terms = items(selector.get("nodeSelectorTerms"), field, MAX_TERMS)
        if not terms:
            raise Invalid(f"{field} must hold at least one term", field)
        checked[REQUIRED] = {
            "nodeSelectorTerms": [_node_term(t, f"{field}[{i}]") for i, t in enumerate(terms)]
        }
    if given.get(PREFERRED) is not None:
        field = f"{where}.{PREFERRED}"
        preferred = []
        for i, p in enumerate(items(given[PREFERRED], field, MAX_TERMS)):
            _known(mapping(p, f"{field}[{i}]"), ("weight", "preference"), f"{field}[{i}]")
            preferred.append({"weight": _weight(p, f"{field}[{i}]"),
                              "preference": _node_term(p.get("preference"),
                                                       f"{field}[{i}].preference")})  # fmt: skip
        checked[PREFERRED] = preferred
    return checked


def _weight(value: Any, where: str) -> int:
    return bounded_int(mapping(value, where).get("weight"), f"{where}.weight", 1, 100)


def _node_term(value: Any, where: str) -> dict[str, Any]:
    given = mapping(value, where)
    _known(given, ("matchExpressions", "matchFields"), where)
    checked: dict[str, Any] = {}
    for part in ("matchExpressions", "matchFields"):
        if given.get(part) is not None:
            field = f"{where}.{part}"
            checked[part] = [
                _requirement(r, f"{field}[{i}]", NODE_OPERATORS)
                for i, r in enumerate(items(given[part], field, MAX_EXPRESSIONS))
            ]
    return checked


def _requirement(value: Any, where: str, operators: tuple[str, ...]) -> dict[str, Any]:
    given = mapping(value, where)
    _known(given, ("key", "operator", "values"), where)
    key = string(given.get("key"), f"{where}.key", limit=317)
    operator = given.get("operator")
    if operator not in operators:
        field = f"{where}.operator"
        raise Invalid(f"{field} must be one of {', '.join(operators)}", field)
    field = f"{where}.values"
    given_values = items(given.get("values") or [], field, MAX_VALUES)
    values = [string(v, f"{field}[{i}]", required=False, limit=63)
              for i, v in enumerate(given_values)]  # fmt: skip
    if operator in ("In", "NotIn") and not values:
        raise Invalid(f"{field} must not be empty for the operator {operator}", field)
    if operator in ("Exists", "DoesNotExist") and values:
        raise Invalid(f"{field} must be empty for the operator {operator}", field)
    if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise Invalid(f"{field} must be one whole number for the operator {operator}", field)
    checked: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        checked["values"] = values
    return checked


def _pod_affinity(value: Any, where: str) -> dict[str, Any]:
    given = mapping(value, where)
    _known(given, (REQUIRED, PREFERRED), where)
    checked: dict[str, Any] = {}
    if given.get(REQUIRED) is not None:
        field = f"{where}.{REQUIRED}"
        checked[REQUIRED] = [
            _pod_term(t, f"{field}[{i}]")
            for i, t in enumerate(items(given[REQUIRED], field, MAX_TERMS))
        ]
    if given.get(PREFERRED) is not None:
        field = f"{where}.{PREFERRED}"
        preferred = []
        for i, p in enumerate(items(given[PREFERRED], field, MAX_TERMS)):
            _known(mapping(p, f"{field}[{i}]"), ("weight", "podAffinityTerm"), f"{field}[{i}]")
            preferred.append({
                "weight": _weight(p, f"{field}[{i}]"),
                "podAffinityTerm": _pod_term(p.get("podAffinityTerm"),
                                             f"{field}[{i}].podAffinityTerm"),
            })  # fmt: skip
        checked[PREFERRED] = preferred
    return checked


def _pod_term(value: Any, where: str) -> dict[str, Any]:
    given = mapping(value, where)
    _known(given, ("labelSelector", "namespaceSelector", "namespaces", "topologyKey"), where)
    checked: dict[str, Any] = {
        "topologyKey": string(given.get("topologyKey"), f"{where}.topologyKey", limit=317)
    }
    for part in ("labelSelector", "namespaceSelector"):
        if given.get(part) is not None:
            checked[part] = _label_selector(given[part], f"{where}.{part}")
    if given.get("namespaces") is not None:
        field = f"{where}.namespaces"
        namespaces = items(given["namespaces"], field, MAX_VALUES)
        checked["namespaces"] = [string(n, f"{field}[{i}]", limit=63)
                                 for i, n in enumerate(namespaces)]  # fmt: skip
    return checked


def _label_selector(value: Any, where: str) -> dict[str, Any]:
    given = mapping(value, where)
    _known(given, ("matchLabels", "matchExpressions"), where)
    checked: dict[str, Any] = {}
    if given.get("matchLabels") is not None:
        checked["matchLabels"] = string_map(given["matchLabels"], f"{where}.matchLabels")
    if given.get("matchExpressions") is not None:
        field = f"{where}.matchExpressions"
        checked["matchExpressions"] = [
            _requirement(r, f"{field}[{i}]", LABEL_OPERATORS)
            for i, r in enumerate(items(given["matchExpressions"], field, MAX_EXPRESSIONS))
        ]
    return checked
