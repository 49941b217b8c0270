"""Pod Security Admission on project namespaces: the level each one enforces, who may choose
it, and the namespace labels that say it.

Kubernetes' PodSecurity admission (on in every kube-apiserver) refuses a pod that breaks the
level its namespace's `pod-security.kubernetes.io/enforce` label names; a namespace without
the label takes the cluster's own default, which is `privileged` unless the cluster was
configured otherwise. So corral labels every namespace of a project itself:

- a project's `podSecurityLevel` when it has one;
- else its cluster's `defaultPodSecurityAdmissionConfigurationTemplateName`, read as a level
  (`TEMPLATES`);
- else `baseline`, as rke2 enforces by default; the System project (kube-system and the
  like, which run the cluster's own privileged pods) defaults to `privileged`.

Only administrators may loosen: set `privileged` anywhere, or give a project a level looser
than its cluster's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from corral.core.errors import Invalid
from corral.core.projects import defaults
from corral.core.projects.downstream import active, project_of

# The fields that choose a level: the cluster's (spec 2.3) and the project's (corral's own).
CLUSTER_FIELD = "defaultPodSecurityAdmissionConfigurationTemplateName"
PROJECT_FIELD = "podSecurityLevel"

RESTRICTED, BASELINE, PRIVILEGED = "restricted", "baseline", "privileged"
LEVELS = (RESTRICTED, BASELINE, PRIVILEGED)  # strictest first
DEFAULT_LEVEL = BASELINE
SYSTEM_LEVEL = PRIVILEGED

# Template names a cluster may give, as the level each enforces on project namespaces: Rancher's
# two built-in templates, corral's own, and the levels' bare names (which clusters stored
# before the names were checked).
TEMPLATES = {
    "rancher-restricted": RESTRICTED,
    "rancher-privileged": PRIVILEGED,
    "corral-restricted": RESTRICTED,
    "corral-baseline": BASELINE,
    "corral-privileged": PRIVILEGED,
    **{level: level for level in LEVELS},
}

LABEL_PREFIX = "pod-security.kubernetes.io/"
# enforce refuses pods; audit and warn say the same in the audit log and to kubectl users.
MODES = ("enforce", "audit", "warn")
VERSION = "latest"


def check_template(value: Any, field: str) -> str:
    """A template name a cluster may give ("" for none: the default)."""
    return _one_of(value, TEMPLATES, field, DEFAULT_LEVEL)


def check_level(value: Any, field: str) -> str:
    """A level a project may give ("" for none: its cluster's)."""
    return _one_of(value, LEVELS, field, "the cluster's")


def _one_of(value: Any, options: Collection[str], field: str, empty: str) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or value not in options:
        raise Invalid(
            f"{field} must be one of {', '.join(options)} (or empty for {empty})",
            field,
            "InvalidOption",
        )
    return value


def cluster_level(template: str | None) -> str:
    """The level a cluster's template name stands for. A name stored by other means that corral
    does not know reads as the default, never as something looser."""
    return TEMPLATES.get(template or "", DEFAULT_LEVEL)


def effective(project_level: str | None, cluster: str, system: bool = False) -> str:
    """The level a project's namespaces enforce."""
    if project_level in LEVELS:
        return str(project_level)
    return SYSTEM_LEVEL if system else cluster


def of_project(project: Mapping[str, Any], cluster: str) -> str:
    """The level the namespaces of a Project enforce, in a cluster whose level is `cluster`."""
    role = (project["metadata"].get("labels") or {}).get(defaults.LABEL_ROLE)
    level = (project.get("spec") or {}).get(PROJECT_FIELD)
    return effective(level, cluster, system=role == defaults.SYSTEM.lower())


def looser(level: str, than: str) -> bool:
    return LEVELS.index(level) > LEVELS.index(than)


def may_set_level(level: str, cluster: str, admin: bool) -> bool:
    """Whether a caller may give a project `level` in a cluster whose level is `cluster`:
    anyone who may change the project may tighten it or leave it to the cluster (""), only
    administrators may loosen it."""
    if admin or not level:
        return True
    return level != PRIVILEGED and not looser(level, cluster)


def may_set_template(template: str, admin: bool) -> bool:
    """Whether a caller may give a cluster `template`: only administrators make every project
    of a cluster privileged."""
    return admin or cluster_level(template) != PRIVILEGED


def labels(level: str) -> dict[str, str]:
    """The labels of a namespace that enforces `level`."""
    found: dict[str, str] = {}
    for mode in MODES:
        found[f"{LABEL_PREFIX}{mode}"] = level
        found[f"{LABEL_PREFIX}{mode}-version"] = VERSION
    return found


def label_fixes(
    namespaces: Iterable[Mapping[str, Any]], cluster_id: str, levels: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """Namespaces of a project (by name in `levels`, the level of each project) whose labels do
    not say their project's level: the labels to set. Namespaces outside every project are
    not corral's to label."""
    fixes: dict[str, dict[str, str]] = {}
    for namespace in namespaces:
        level = levels.get(project_of(namespace, cluster_id) or "")
        if level is None or not active(namespace):
            continue
        have = namespace["metadata"].get("labels") or {}
        wanted = labels(level)
        if any(have.get(k) != v for k, v in wanted.items()):
            fixes[namespace["metadata"]["name"]] = wanted
    return fixes
