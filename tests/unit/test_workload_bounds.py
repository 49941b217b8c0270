"""A workload makes at most the pods the setting allows, each of a bounded size; a project that
sets no quota gets its cluster's defaults."""

from __future__ import annotations

import pytest

from corral.core.errors import Invalid
from corral.core.projects import defaults, quota
from corral.core.workloads import spec
from corral.core.workloads.kinds import KINDS


def deployment(scale: int, env: int = 0) -> dict[str, object]:
    container = {"name": "web", "image": "nginx",
                 "env": [{"name": f"E{i}", "value": "x" * 4000} for i in range(env)]}  # fmt: skip
    return spec.build(KINDS["deployment"], "ns", "web", {"scale": scale, "containers": [container]})


def test_a_scale_within_the_setting_passes() -> None:
    spec.check_bounds(KINDS["deployment"], deployment(1000), max_scale=1000)


def test_a_scale_above_the_setting_is_refused_naming_scale() -> None:
    with pytest.raises(Invalid) as refused:
        spec.check_bounds(KINDS["deployment"], deployment(1001), max_scale=1000)
    assert (refused.value.field, refused.value.code) == ("scale", "MaxLimitExceeded")


def test_a_pod_template_larger_than_every_pod_should_carry_is_refused() -> None:
    small = deployment(1, env=30)  # about 120 KB
    spec.check_bounds(KINDS["deployment"], small, max_scale=1000)
    with pytest.raises(Invalid) as refused:
        spec.check_bounds(KINDS["deployment"], deployment(1, env=34), max_scale=1000)
    assert (refused.value.field, refused.value.code) == ("containers", "MaxLimitExceeded")
    assert str(spec.MAX_TEMPLATE_BYTES) in refused.value.message


def test_a_project_of_its_own_quota_keeps_it_and_one_without_gets_the_clusters() -> None:
    cluster = {
        quota.CLUSTER_NAMESPACE_QUOTA: {"limit": {"pods": "20"}},
        quota.CLUSTER_CONTAINER_DEFAULTS: {"limitsCpu": "500m"},
    }
    own = {"namespaceDefaultResourceQuota": {"limit": {"pods": "5"}},
           "containerDefaultResourceLimit": {"limitsCpu": "1"}}  # fmt: skip
    assert quota.effective(own, cluster) == ({"pods": "5"}, {"limitsCpu": "1"})
    assert quota.effective({}, cluster) == ({"pods": "20"}, {"limitsCpu": "500m"})
    assert quota.effective({}, {}) == ({}, {})


def test_the_system_project_never_takes_the_clusters_defaults() -> None:
    from corral.operator.downstream.projects import view

    cluster = {quota.CLUSTER_NAMESPACE_QUOTA: {"limit": {"pods": "20"}}}
    plain = {"metadata": {"name": "p-a", "labels": {}}, "spec": {}}
    system = {"metadata": {"name": "p-s", "labels": {defaults.LABEL_ROLE: "system"}}}
    assert view(plain, cluster).namespace_quota == {"pods": "20"}
    assert view(system, cluster).namespace_quota == {}
