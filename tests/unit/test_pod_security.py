"""The pure rules of Pod Security Admission on project namespaces: template names, the level a
project's namespaces enforce, who may choose one, and the labels that say it."""

from __future__ import annotations

from typing import Any

import pytest

from corral.core.errors import Invalid
from corral.core.projects import podsecurity
from corral.core.projects.podsecurity import BASELINE, PRIVILEGED, RESTRICTED

CLUSTER = "c-1"


@pytest.mark.parametrize(
    ("template", "level"),
    [
        ("rancher-restricted", RESTRICTED),
        ("rancher-privileged", PRIVILEGED),
        ("corral-baseline", BASELINE),
        ("corral-restricted", RESTRICTED),
        ("corral-privileged", PRIVILEGED),
        ("restricted", RESTRICTED),
        ("baseline", BASELINE),
        ("", BASELINE),
        (None, BASELINE),
        # Stored by other means (kubectl, an older corral): never read as looser.
        ("my-own-template", BASELINE),
    ],
)
def test_a_clusters_template_name_reads_as_a_level(template: str | None, level: str) -> None:
    assert podsecurity.cluster_level(template) == level


@pytest.mark.parametrize("value", ["Not A Name", "my-own-template", "Restricted", 7, ["x"]])
def test_a_template_corral_does_not_know_is_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(Invalid) as raised:
        podsecurity.check_template(value, "defaultPodSecurityAdmissionConfigurationTemplateName")
    assert raised.value.field == "defaultPodSecurityAdmissionConfigurationTemplateName"
    assert raised.value.code == "InvalidOption"
    assert "rancher-restricted" in raised.value.message


@pytest.mark.parametrize("value", ["", None, *podsecurity.LEVELS])
def test_levels_and_empty_are_a_projects_choices(value: str | None) -> None:
    assert podsecurity.check_level(value, "podSecurityLevel") == (value or "")


@pytest.mark.parametrize("value", ["Baseline", "rancher-privileged", "none", True, {"x": 1}])
def test_anything_else_is_refused_as_a_projects_level(value: Any) -> None:
    with pytest.raises(Invalid) as raised:
        podsecurity.check_level(value, "podSecurityLevel")
    assert (raised.value.field, raised.value.code) == ("podSecurityLevel", "InvalidOption")


def project(level: str | None = None, role: str | None = None) -> dict[str, Any]:
    labels = {"management.svc.io/project-role": role} if role else {}
    spec = {"podSecurityLevel": level} if level is not None else {}
    return {"metadata": {"name": "p-1", "namespace": CLUSTER, "labels": labels}, "spec": spec}


def test_a_project_enforces_its_own_level_else_its_clusters() -> None:
    assert podsecurity.of_project(project(), BASELINE) == BASELINE
    assert podsecurity.of_project(project(""), RESTRICTED) == RESTRICTED
    assert podsecurity.of_project(project(RESTRICTED), PRIVILEGED) == RESTRICTED
    assert podsecurity.of_project(project(PRIVILEGED), RESTRICTED) == PRIVILEGED
    # The System project runs the cluster's own pods (kube-proxy, CNI agents).
    assert podsecurity.of_project(project(role="system"), RESTRICTED) == PRIVILEGED
    assert podsecurity.of_project(project(BASELINE, role="system"), RESTRICTED) == BASELINE
    assert podsecurity.of_project(project(role="default"), RESTRICTED) == RESTRICTED


@pytest.mark.parametrize(
    ("level", "cluster", "allowed"),
    [
        ("", BASELINE, True),
        (RESTRICTED, BASELINE, True),
        (BASELINE, BASELINE, True),
        (BASELINE, RESTRICTED, False),  # looser than the cluster's
        (PRIVILEGED, BASELINE, False),
        (PRIVILEGED, PRIVILEGED, False),  # privileged is the administrators' alone
        (RESTRICTED, PRIVILEGED, True),
    ],
)
def test_only_administrators_loosen_a_project(level: str, cluster: str, allowed: bool) -> None:
    assert podsecurity.may_set_level(level, cluster, admin=False) is allowed
    assert podsecurity.may_set_level(level, cluster, admin=True) is True


def test_only_administrators_make_a_cluster_privileged() -> None:
    for template in ("rancher-privileged", "corral-privileged", "privileged"):
        assert not podsecurity.may_set_template(template, admin=False)
        assert podsecurity.may_set_template(template, admin=True)
    for template in ("", "rancher-restricted", "corral-baseline"):
        assert podsecurity.may_set_template(template, admin=False)


def test_labels_enforce_audit_and_warn_the_level_at_the_latest_version() -> None:
    assert podsecurity.labels(BASELINE) == {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/audit": "baseline",
        "pod-security.kubernetes.io/audit-version": "latest",
        "pod-security.kubernetes.io/warn": "baseline",
        "pod-security.kubernetes.io/warn-version": "latest",
    }


def namespace(name: str, project: str | None, **labels: str) -> dict[str, Any]:
    annotations = {"field.svc.io/projectId": f"{CLUSTER}:{project}"} if project else {}
    return {"metadata": {"name": name, "annotations": annotations, "labels": labels}}


def test_label_fixes_name_the_project_namespaces_whose_labels_are_not_their_projects() -> None:
    right = namespace("right", "p-1")
    right["metadata"]["labels"] = podsecurity.labels(RESTRICTED)
    edited = namespace("edited", "p-1")
    edited["metadata"]["labels"] = {
        **podsecurity.labels(RESTRICTED),
        "pod-security.kubernetes.io/enforce": "privileged",
    }
    going = namespace("going", "p-1")
    going["metadata"]["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    found = [
        right,
        edited,
        going,
        namespace("bare", "p-2"),
        namespace("outside", None),
        namespace("unknown-project", "p-9"),
        namespace("other-cluster", None),
    ]
    found[-1]["metadata"]["annotations"] = {"field.svc.io/projectId": "c-2:p-1"}
    fixes = podsecurity.label_fixes(found, CLUSTER, {"p-1": RESTRICTED, "p-2": BASELINE})
    assert fixes == {
        "edited": podsecurity.labels(RESTRICTED),
        "bare": podsecurity.labels(BASELINE),
    }
