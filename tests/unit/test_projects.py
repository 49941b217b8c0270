"""Pure project logic: quota arithmetic, what lands downstream, conditions, roles."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest

from corral.apiserver.auth.access import Access, AccessMemo
from corral.core.api import names
from corral.core.kube import kinds, user_attributes
from corral.core.kube.informer import Informer
from corral.core.projects import defaults, downstream, quota, roles, status
from corral.core.projects.downstream import Binding, ProjectView


def namespace(name: str, project: str | None = None, **meta: Any) -> dict[str, Any]:
    annotations = {names.ANNOTATION_PROJECT: project} if project else {}
    return {"metadata": {"name": name, "annotations": annotations, **meta}}


# -- quota --------------------------------------------------------------------------------------


def test_limits_are_parsed_and_checked() -> None:
    assert quota.parse_limits({"limitsCpu": "500m", "pods": "10"}, "f") == {
        "limitsCpu": "500m",
        "pods": "10",
    }
    assert quota.parse_limits(None, "f") == {}
    assert quota.parse_limits({"pods": ""}, "f") == {}
    for value, field in (
        ({"limitsCpu": "lots"}, "f.limitsCpu"),
        ({"limitsCpu": "-1"}, "f.limitsCpu"),
        ({"gpus": "1"}, "f.gpus"),
        ("1", "f"),
    ):
        with pytest.raises(quota.QuotaError) as caught:
            quota.parse_limits(value, "f")
        assert caught.value.field == field


@pytest.mark.parametrize(
    ("limit", "default", "field"),
    [
        ({"pods": "10"}, {}, "namespaceDefaultResourceQuota.limit"),
        ({}, {"pods": "1"}, "resourceQuota.limit"),
        ({"pods": "10"}, {"services": "1"}, "namespaceDefaultResourceQuota.limit"),
        ({"limitsCpu": "1"}, {"limitsCpu": "2"}, "namespaceDefaultResourceQuota.limit"),
    ],
)
def test_a_project_quota_and_its_default_go_together(
    limit: dict[str, str], default: dict[str, str], field: str
) -> None:
    with pytest.raises(quota.QuotaError) as caught:
        quota.check_project_quota(limit, default)
    assert caught.value.field == field


def test_overcommit_names_the_resource_and_the_numbers() -> None:
    limit = {"limitsCpu": "1", "limitsMemory": "1Gi", "pods": "10"}
    default = {"limitsCpu": "500m", "limitsMemory": "256Mi", "pods": "5"}
    assert quota.overcommit(limit, default, 2) == []
    excess = quota.overcommit(limit, default, 3)
    assert [e.field for e in excess] == ["limitsCpu", "pods"]
    assert excess[0].describe() == "limitsCpu: 3 namespace(s) x 500m = 1500m exceeds the limit 1"
    assert excess[1].describe() == "pods: 3 namespace(s) x 5 = 15 exceeds the limit 10"


def test_a_limit_below_use_is_found() -> None:
    used = {"limitsCpu": Decimal("0.75"), "limitsMemory": Decimal(2**29)}
    found = quota.below_use({"limitsCpu": "500m", "limitsMemory": "1Gi"}, used, "the project")
    assert [e.describe() for e in found] == [
        "limitsCpu: the project already uses = 750m exceeds the limit 500m"
    ]


def test_usage_sums_resource_quota_status_under_v3_names() -> None:
    quotas = [
        {"status": {"used": {"limits.cpu": "200m", "pods": "1"}, "hard": {"limits.cpu": "1"}}},
        {"status": {"used": {"limits.cpu": "300m", "pods": "2"}, "hard": {"limits.cpu": "1"}}},
        {"status": {}},
    ]
    totals = quota.usage(quotas)
    assert quota.printable(totals["used"]) == {"limitsCpu": "500m", "pods": "3"}
    assert quota.printable(totals["hard"]) == {"limitsCpu": "2"}


def test_container_defaults_become_a_limit_range() -> None:
    defaults_ = {"limitsCpu": "200m", "requestsCpu": "100m", "requestsMemory": "64Mi"}
    assert quota.limit_range_limits(defaults_) == [
        {
            "type": "Container",
            "default": {"cpu": "200m"},
            "defaultRequest": {"cpu": "100m", "memory": "64Mi"},
        }
    ]
    quota.check_container_defaults(defaults_)
    with pytest.raises(quota.QuotaError):
        quota.check_container_defaults({"requestsMemory": "1Gi", "limitsMemory": "512Mi"})


# -- downstream objects ------------------------------------------------------------------------


def wanted_for(**overrides: Any) -> dict[downstream.Key, dict[str, Any]]:
    args: dict[str, Any] = {
        "cluster_id": "c-1",
        "namespaces": [
            namespace("a1", "c-1:p-a"),
            namespace("b1", "c-1:p-b"),
            namespace("kube-system", "c-1:p-sys"),
            namespace("loose"),
            namespace("foreign", "c-2:p-a"),
        ],
        "projects": {
            "p-a": ProjectView("p-a", {"pods": "5"}, {"limitsCpu": "1"}),
            "p-b": ProjectView("p-b"),
            "p-sys": ProjectView("p-sys", system=True),
        },
        "project_bindings": [Binding("prtb-1", "u-1", "project-member", "p-a")],
        "cluster_bindings": [Binding("crtb-1", "u-2", "cluster-owner")],
        "isolate": False,
    }
    args.update(overrides)
    return downstream.desired(**args)


def test_each_project_namespace_gets_its_quota_defaults_and_bindings() -> None:
    wanted = wanted_for()
    assert sorted(wanted) == [
        ("ClusterRole", "", "corral-cluster-member"),
        ("ClusterRoleBinding", "", "corral-crtb-1"),
        ("LimitRange", "a1", "corral-container-defaults"),
        ("ResourceQuota", "a1", "corral-project-quota"),
        ("RoleBinding", "a1", "corral-prtb-1"),
    ]
    assert wanted[("ResourceQuota", "a1", "corral-project-quota")]["spec"] == {
        "hard": {"pods": "5"}
    }
    binding = wanted[("RoleBinding", "a1", "corral-prtb-1")]
    assert binding["roleRef"]["name"] == "edit" and binding["subjects"][0]["name"] == "u-1"
    assert binding["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "corral",
        names.LABEL_PROJECT: "p-a",
    }
    crb = wanted[("ClusterRoleBinding", "", "corral-crtb-1")]
    assert crb["roleRef"]["name"] == "cluster-admin"


def test_isolation_admits_the_project_and_the_system_project_only() -> None:
    wanted = wanted_for(isolate=True)
    policies = {k[1]: v for k, v in wanted.items() if k[0] == "NetworkPolicy"}
    assert sorted(policies) == ["a1", "b1"]  # never the System project's namespaces
    sources = policies["b1"]["spec"]["ingress"][0]["from"]
    assert [s["namespaceSelector"]["matchLabels"][names.LABEL_PROJECT] for s in sources] == [
        "p-b",
        "p-sys",
    ]


def test_terminating_namespaces_get_nothing() -> None:
    gone = namespace("a1", "c-1:p-a", deletionTimestamp="2026-01-01T00:00:00Z")
    wanted = wanted_for(namespaces=[gone])
    assert all(key[1] == "" for key in wanted)


def test_differences_compare_content_hashes() -> None:
    wanted = wanted_for()
    existing = {key: dict(manifest) for key, manifest in wanted.items()}
    assert downstream.differences(wanted, existing) == ([], [])
    changed = wanted_for(
        projects={"p-a": ProjectView("p-a", {"pods": "6"}, {"limitsCpu": "1"})},
        project_bindings=[],
    )
    stale, unwanted = downstream.differences(changed, existing)
    assert stale == [("ResourceQuota", "a1", "corral-project-quota")]
    assert unwanted == [("RoleBinding", "a1", "corral-prtb-1")]
    pending = downstream.pending_by_project(changed, existing)
    assert pending == {"p-a": {"ResourceQuota": 1}}


def test_labels_follow_the_annotation() -> None:
    fixes = downstream.label_fixes(
        [
            namespace("a1", "c-1:p-a", labels={names.LABEL_PROJECT: "p-a"}),
            namespace("a2", "c-1:p-a"),
            namespace("gone", None, labels={names.LABEL_PROJECT: "p-a"}),
        ],
        "c-1",
    )
    assert fixes == {"a2": "p-a", "gone": None}


# -- conditions, names, roles -------------------------------------------------------------------


def observed(**overrides: Any) -> status.Observed:
    values: dict[str, Any] = {
        "backing_namespace": "c-1-p-a",
        "backing_exists": True,
        "creator": "u-1",
        "creator_bound": True,
        "reachable": True,
        "isolate": False,
        "system": False,
        "namespaces": 2,
    }
    values.update(overrides)
    return status.Observed(**values)


def by_type(found: list[Any]) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in found}


def test_project_conditions_from_observations() -> None:
    assert by_type(status.project_conditions(observed(), [])) == {
        "BackingNamespaceCreated": ("True", "Created"),
        "CreatorMadeOwner": ("True", "OwnerBound"),
        "InitialRolesPopulated": ("True", "Populated"),
        "DefaultNetworkPolicyCreated": ("True", "NetworkPolicyDisabled"),
    }
    pending = by_type(
        status.project_conditions(
            observed(
                backing_exists=False,
                creator_bound=False,
                isolate=True,
                pending={"RoleBinding": 2, "NetworkPolicy": 1},
            ),
            [],
        )
    )
    assert pending == {
        "BackingNamespaceCreated": ("False", "Creating"),
        "CreatorMadeOwner": ("False", "Binding"),
        "InitialRolesPopulated": ("False", "WaitingForOwner"),
        "DefaultNetworkPolicyCreated": ("False", "Pending"),
    }
    # Nothing pending yet, but no creator binding yet either: the roles are not in place.
    waiting = by_type(status.project_conditions(observed(creator_bound=False), []))
    assert waiting["InitialRolesPopulated"] == ("False", "WaitingForOwner")
    bindings = by_type(status.project_conditions(observed(pending={"RoleBinding": 1}), []))
    assert bindings["InitialRolesPopulated"] == ("False", "Pending")
    away = by_type(status.project_conditions(observed(reachable=False), []))
    assert away["InitialRolesPopulated"] == ("Unknown", "ClusterUnavailable")


def test_the_creator_is_made_owner_once() -> None:
    done = [{"type": "CreatorMadeOwner", "status": "True"}]
    # The owner binding was removed later on purpose: the condition stays, nothing comes back.
    found = by_type(status.project_conditions(observed(creator_bound=False), done))
    assert found["CreatorMadeOwner"] == ("True", "OwnerBound")
    assert by_type(status.project_conditions(observed(creator=None), []))["CreatorMadeOwner"] == (
        "True",
        "NoCreator",
    )


def test_default_project_names_are_stable_and_look_like_ids() -> None:
    first = defaults.project_name("c-abcde", defaults.DEFAULT)
    assert first == defaults.project_name("c-abcde", defaults.DEFAULT)
    assert first != defaults.project_name("c-abcde", defaults.SYSTEM)
    assert first != defaults.project_name("c-other", defaults.DEFAULT)
    assert first.startswith("p-") and len(first) == 7


def test_the_strongest_role_wins() -> None:
    assert roles.strongest(["read-only", "project-owner"], roles.PROJECT_ROLES) == "project-owner"
    assert roles.strongest(["nonsense"], roles.PROJECT_ROLES) is None
    assert roles.may_write_namespaces("project-member")
    assert not roles.may_write_namespaces("read-only")
    assert not roles.may_manage_project("project-member")


# -- access from bindings -------------------------------------------------------------------------


def binding(namespace: str, **spec: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace}, "spec": spec}


def test_access_follows_the_strongest_binding_stored_in_its_place() -> None:
    project_bindings = [
        binding("c-1-p-a", projectName="c-1:p-a", roleTemplateName="read-only"),
        binding("c-1-p-a", projectName="c-1:p-a", roleTemplateName="project-member"),
        # Not in p-b's backing namespace: the operator ignores it, so must the API.
        binding("elsewhere", projectName="c-1:p-b", roleTemplateName="project-owner"),
    ]
    cluster_bindings = [
        binding("c-2", clusterName="c-2", roleTemplateName="cluster-owner"),
        binding("c-1", clusterName="c-3", roleTemplateName="cluster-owner"),
    ]
    access = Access.of("u-1", False, cluster_bindings, project_bindings)
    assert access.project_role("c-1:p-a") == "project-member"
    assert access.project_role("c-1:p-b") is None
    assert access.sees_cluster("c-1") and access.cluster_role("c-1") is None
    assert access.project_role("c-2:p-any") == "project-owner"  # cluster owners own projects
    assert not access.sees_cluster("c-3")
    admin = Access.of("u-admin", True, [], [])
    assert admin.cluster_role("c-9") == "cluster-owner" and admin.project_role("c-9:p-x")


def _access_stores() -> SimpleNamespace:
    indexes = {
        "user": lambda o: [o["spec"].get("userName", "")],
        "group": lambda o: [o["spec"].get("groupPrincipalName", "")],
    }
    project_bindings = Informer(None, kinds.ProjectRoleTemplateBinding, indexes)
    cluster_bindings = Informer(None, kinds.ClusterRoleTemplateBinding, indexes)
    attributes = Informer(None, kinds.UserAttribute)
    return SimpleNamespace(
        project_bindings=project_bindings,
        cluster_bindings=cluster_bindings,
        user_attributes=attributes,
        groups=lambda user: user_attributes.groups_of(attributes.get(user)),
    )


def test_access_is_worked_out_again_when_a_binding_changes() -> None:
    stores = _access_stores()
    project_bindings = stores.project_bindings
    memo = AccessMemo()
    assert memo.get("u-1", False, stores).project_role("c-1:p-a") is None
    project_bindings.put(
        {
            "metadata": {"name": "prtb-1", "namespace": "c-1-p-a"},
            "spec": {"projectName": "c-1:p-a", "userName": "u-1", "roleTemplateName": "read-only"},
        }
    )
    assert memo.get("u-1", False, stores).project_role("c-1:p-a") == "read-only"
    project_bindings.forget("c-1-p-a/prtb-1")
    assert memo.get("u-1", False, stores).project_role("c-1:p-a") is None


def test_a_group_binding_counts_while_the_provider_says_the_user_is_in_the_group() -> None:
    stores = _access_stores()
    memo = AccessMemo()
    stores.project_bindings.put({
        "metadata": {"name": "prtb-g", "namespace": "c-1-p-a"},
        "spec": {"projectName": "c-1:p-a", "groupPrincipalName": "oidc_group://eng",
                 "roleTemplateName": "project-member"},
    })  # fmt: skip
    stores.project_bindings.put({
        "metadata": {"name": "prtb-u", "namespace": "c-1-p-a"},
        "spec": {"projectName": "c-1:p-a", "userName": "u-1", "roleTemplateName": "read-only"},
    })  # fmt: skip

    def member_of(*groups: str) -> None:
        meta = {"name": "u-1", "resourceVersion": str(groups)}
        stores.user_attributes.put(
            {"metadata": meta, "userName": "u-1", "groupPrincipals": {"oidc": list(groups)}}
        )

    member_of("oidc_group://eng")
    assert memo.get("u-1", False, stores).project_role("c-1:p-a") == "project-member"
    assert memo.get("u-2", False, stores).project_role("c-1:p-a") is None
    member_of("oidc_group://other")  # the provider dropped them from eng
    assert memo.get("u-1", False, stores).project_role("c-1:p-a") == "read-only"
