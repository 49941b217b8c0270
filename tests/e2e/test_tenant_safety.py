"""One project member cannot hurt anyone else: what corral writes downstream for them is
written as them (the cluster's own admission sees who they are), a workload's pods are bounded
in number and size, and a project without a quota of its own gets its cluster's defaults."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

from .api import Api
from .test_projects import Team, create_namespace, create_project, team, unique

__all__ = ["team"]

PROBE_LABEL = "corral-test/identity-probe"
PROBE_COMMAND = "identity-probe"


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def identity_probe(downstream: k8s.ApiClient) -> Iterator[None]:
    """A ValidatingAdmissionPolicy of the downstream cluster that refuses every Deployment
    labelled `PROBE_LABEL` and every command `PROBE_COMMAND` run in a pod, naming the user and
    groups the cluster saw make the request."""
    admission = k8s.AdmissionregistrationV1Api(downstream)
    name = unique("identity-probe")
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["deployments"],
                        },
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CONNECT"],
                            "resources": ["pods/exec"],
                        },
                    ]
                },
                "matchConditions": [
                    {
                        "name": "labelled",
                        "expression": f"'{PROBE_LABEL}' in object.?metadata.?labels.orValue({{}})"
                        f" || object.?command.orValue([]).exists(c, c == '{PROBE_COMMAND}')",
                    }
                ],
                "validations": [
                    {
                        "expression": "false",
                        "messageExpression": "'written by ' + request.userInfo.username + "
                        "' in ' + request.userInfo.groups.join(',')",
                    }
                ],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        }
    )
    yield
    admission.delete_validating_admission_policy_binding(name)
    admission.delete_validating_admission_policy(name)


def probe_workload(namespace: str) -> dict[str, object]:
    return {
        "name": unique("probe"),
        "namespaceId": namespace,
        "labels": {PROBE_LABEL: "yes"},
        "containers": [{"name": "app", "image": "registry.example/app:1"}],
    }


def test_a_members_workload_reaches_the_cluster_as_the_member(
    api: Api, cluster: str, team: Team, identity_probe: None
) -> None:
    url = f"/v3/projects/{team.project}/workloads"

    def refusal() -> str | None:
        # The policy is in force once the cluster has compiled it: until then writes pass.
        answer = team.member.api.post(url, probe_workload(team.namespace))
        return answer.body.get("message") if answer.status == 422 else None

    message = wait_for("the identity probe in force", refusal, 30)
    assert f"written by {team.member.id} in system:authenticated" in message
    assert "system:masters" not in message
    admin = api.post(url, probe_workload(team.namespace))
    assert admin.status == 422
    assert "system:masters" in admin.body["message"]


def test_a_members_command_reaches_the_cluster_as_the_member(
    api: Api, cluster: str, team: Team, identity_probe: None
) -> None:
    created = api.post(
        f"/v3/projects/{team.project}/workloads",
        {"name": unique("exec"), "namespaceId": team.namespace,
         "containers": [{"name": "app", "image": "registry.example/app:1"}]},
    )  # fmt: skip
    assert created.status == 201, created.body
    pods_url = f"/v3/projects/{team.project}/pods?workloadId={created.body['id']}"
    pod = wait_for(
        "the workload's pod running",
        lambda: next((p for p in api.get(pods_url).body["data"] if p["state"] == "running"), None),
        60,
    )
    run = team.member.api.post(
        f"/v3/projects/{team.project}/pods/{pod['id']}?action=execute",
        {"command": ["sh", "-c", PROBE_COMMAND]},
    )
    assert run.status == 422, run.body
    assert f"written by {team.member.id} in system:authenticated" in run.body["message"]


# -- bounded objects ----------------------------------------------------------------------------


def probe_template(containers: int = 32, entries: int = 256) -> list[dict[str, object]]:
    """The hostile probe's containers: 32 of them with 256 env entries, args and ports each
    (about 1.4 MB in all)."""
    return [
        {
            "name": f"c{c}",
            "image": "registry.example/app:1",
            "env": [{"name": f"E{i}", "value": "v" * 100} for i in range(entries)],
            "args": ["a" * 40] * entries,
            "ports": [{"containerPort": 1000 + c * entries + i} for i in range(entries)][:256],
        }
        for c in range(containers)
    ]


def rss_kib(process: Process) -> int:
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {process.name}")


def downstream_apiserver(stack: Environment) -> Process:
    return next(p for p in stack.downstreams[0].processes if "apiserver" in p.name)


def test_the_hostile_probe_is_refused_and_nothing_grows(
    stack: Environment, cluster: str, team: Team, downstream: k8s.ApiClient
) -> None:
    apps = k8s.AppsV1Api(downstream)
    url = f"/v3/projects/{team.project}/workloads"
    watched = [downstream_apiserver(stack), *(p for p in stack.corral)]
    before = {p.name: rss_kib(p) for p in watched}
    name = unique("probe")
    body = {"name": name, "namespaceId": team.namespace, "scale": 10_000,
            "containers": probe_template()}  # fmt: skip
    began = time.monotonic()
    answer = team.member.api.post(url, body)
    assert answer.status == 422, answer.body
    assert answer.body["code"] == "MaxLimitExceeded"
    assert answer.body["fieldName"] in ("scale", "containers")
    assert time.monotonic() - began < 30
    small = {**body, "containers": [{"name": "app", "image": "registry.example/app:1"}]}
    scaled = team.member.api.post(url, small)
    assert scaled.status == 422, scaled.body
    assert (scaled.body["code"], scaled.body["fieldName"]) == ("MaxLimitExceeded", "scale")
    big = {**body, "scale": 1}
    sized = team.member.api.post(url, big)
    assert sized.status == 422, sized.body
    assert (sized.body["code"], sized.body["fieldName"]) == ("MaxLimitExceeded", "containers")
    assert [d.metadata.name for d in apps.list_namespaced_deployment(team.namespace).items
            if d.metadata.name == name] == []  # fmt: skip
    after = {p.name: rss_kib(p) for p in watched}
    for process in watched:
        grown = after[process.name] - before[process.name]
        # Three refused requests of 1.4 MB: parsing one costs a few MB; the probe cost GBs.
        assert grown < 100 * 1024, f"{process.name} grew by {grown} KiB"


def test_a_put_that_scales_past_the_setting_is_refused_and_changes_nothing(
    api: Api, cluster: str, team: Team, setting: object, downstream: k8s.ApiClient
) -> None:
    url = f"/v3/projects/{team.project}/workloads"
    created = team.member.api.post(
        url, {"name": unique("scaled"), "namespaceId": team.namespace, "scale": 2,
              "containers": [{"name": "app", "image": "registry.example/app:1"}]},
    )  # fmt: skip
    assert created.status == 201, created.body
    setting("workload-max-scale", "3")  # type: ignore[operator]
    wid = created.body["id"]
    refused = team.member.api.put(f"{url}/{wid}", {"scale": 4})
    assert refused.status == 422, refused.body
    assert (refused.body["code"], refused.body["fieldName"]) == ("MaxLimitExceeded", "scale")
    assert "workload-max-scale" in refused.body["message"]
    name = wid.split(":")[2]
    stored = k8s.AppsV1Api(downstream).read_namespaced_deployment(name, team.namespace)
    assert stored.spec.replicas == 2
    assert team.member.api.put(f"{url}/{wid}", {"scale": 3}).status == 200


# -- the cluster's default project limits ---------------------------------------------------------


@pytest.fixture
def cluster_defaults(api: Api, cluster: str) -> Iterator[None]:
    changed = api.put(
        f"/v3/clusters/{cluster}",
        {"defaultProjectNamespaceResourceQuota": {"limit": {"pods": "3"}},
         "defaultProjectContainerResourceLimit": {"limitsCpu": "200m", "requestsCpu": "100m"}},
    )  # fmt: skip
    assert changed.status == 200, changed.body
    assert changed.body["defaultProjectNamespaceResourceQuota"] == {"limit": {"pods": "3"}}
    yield
    cleared = api.put(
        f"/v3/clusters/{cluster}",
        {
            "defaultProjectNamespaceResourceQuota": None,
            "defaultProjectContainerResourceLimit": None,
        },
    )  # fmt: skip
    assert cleared.status == 200, cleared.body
    assert "defaultProjectNamespaceResourceQuota" not in cleared.body


def test_a_project_without_a_quota_is_held_to_the_clusters_defaults(
    api: Api, cluster: str, cluster_defaults: None, downstream: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(downstream)
    project = create_project(api, cluster)["id"]
    namespace = create_namespace(api, cluster, project).body["name"]
    quota = wait_for(
        "the cluster's default quota in the namespace",
        lambda: next(iter(core.list_namespaced_resource_quota(namespace).items), None),
        60,
    )
    assert quota.spec.hard == {"pods": "3"}
    limits = wait_for(
        "the cluster's container defaults in the namespace",
        lambda: next(iter(core.list_namespaced_limit_range(namespace).items), None),
        60,
    )
    assert limits.spec.limits[0].default == {"cpu": "200m"}
    # The quota's status is what corral's check reads, from its watch cache: wait until the
    # cluster has counted and corral has seen the count (what the project's usage shows).
    wait_for("the quota counted in corral",
             lambda: api.get(f"/v3/projects/{project}?include=usage").body["usage"]["hard"]
             == {"pods": "3"}, 30)  # fmt: skip
    too_many = api.post(
        f"/v3/projects/{project}/workloads",
        {"name": unique("many"), "namespaceId": namespace, "scale": 5,
         "containers": [{"name": "app", "image": "registry.example/app:1"}]},
    )  # fmt: skip
    assert too_many.status == 422, too_many.body
    assert too_many.body["code"] == "QuotaExceeded"
    own = create_project(
        api, cluster, resourceQuota={"limit": {"pods": "50"}},
        namespaceDefaultResourceQuota={"limit": {"pods": "10"}},
    )["id"]  # fmt: skip
    own_namespace = create_namespace(api, cluster, own).body["name"]
    own_quota = wait_for(
        "the project's own quota in its namespace",
        lambda: next(iter(core.list_namespaced_resource_quota(own_namespace).items), None),
        60,
    )
    assert own_quota.spec.hard == {"pods": "10"}


def test_bad_cluster_defaults_are_refused_and_change_nothing(api: Api, cluster: str) -> None:
    before = api.get(f"/v3/clusters/{cluster}").body
    cases = [
        ({"defaultProjectNamespaceResourceQuota": {"limit": {"pods": "1e999999"}}},
         "defaultProjectNamespaceResourceQuota.limit.pods"),
        ({"defaultProjectNamespaceResourceQuota": {"limit": {"gpus": "1"}}},
         "defaultProjectNamespaceResourceQuota.limit.gpus"),
        ({"defaultProjectNamespaceResourceQuota": "lots"}, "defaultProjectNamespaceResourceQuota"),
        ({"defaultProjectContainerResourceLimit": {"limitsCpu": "100m", "requestsCpu": "1"}},
         "defaultProjectContainerResourceLimit.requestsCpu"),
    ]  # fmt: skip
    for body, field in cases:
        answer = api.put(f"/v3/clusters/{cluster}", body)
        assert answer.status == 422, (body, answer.body)
        assert answer.body["fieldName"] == field, (body, answer.body)
    after = api.get(f"/v3/clusters/{cluster}").body
    assert after.get("defaultProjectNamespaceResourceQuota") == before.get(
        "defaultProjectNamespaceResourceQuota"
    )
