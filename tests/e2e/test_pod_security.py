"""Pod Security Admission on project namespaces (issue #21), driven through /v3 as clients
would and checked in the downstream cluster with the official client: the labels corral keeps
on every project namespace, the levels of clusters and projects and who may set them, and the
kube-apiserver's own PodSecurity admission judging a project member's workloads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person, new_person
from .test_projects import all_true, create_namespace, create_project, unique

ENFORCE = "pod-security.kubernetes.io/enforce"
TEMPLATE = "defaultPodSecurityAdmissionConfigurationTemplateName"
ANNOTATION = "field.svc.io/projectId"


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def core(downstream: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(downstream)


@pytest.fixture(scope="module")
def apps(downstream: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(downstream)


def labels_of(core: k8s.CoreV1Api, namespace: str) -> dict[str, str]:
    return core.read_namespace(namespace).metadata.labels or {}


def enforced(core: k8s.CoreV1Api, namespace: str) -> str | None:
    return labels_of(core, namespace).get(ENFORCE)


def wait_enforced(core: k8s.CoreV1Api, namespace: str, level: str) -> None:
    wait_for(f"{namespace} enforcing {level}", lambda: enforced(core, namespace) == level, 30)


@pytest.fixture
def cluster_template(api: Api, cluster: str) -> Iterator[None]:
    """Puts the cluster's template back after a test that changes it."""
    before = api.get(f"/v3/clusters/{cluster}").body.get(TEMPLATE) or ""
    yield
    restored = api.put(f"/v3/clusters/{cluster}", {TEMPLATE: before})
    assert restored.status == 200, restored.body


def test_every_project_namespace_carries_its_level_and_follows_changes(
    api: Api, cluster: str, core: k8s.CoreV1Api, cluster_template: None
) -> None:
    project = create_project(api, cluster)["id"]
    # Made through /v3: labelled in the same write, before anything can run in it.
    made = create_namespace(api, cluster, project)
    assert made.status == 201, made.body
    ns = made.body["name"]
    assert made.body["labels"][ENFORCE] == "baseline"
    expected = {
        ENFORCE: "baseline",
        f"{ENFORCE}-version": "latest",
        "pod-security.kubernetes.io/warn": "baseline",
        "pod-security.kubernetes.io/audit": "baseline",
    }
    assert labels_of(core, ns).items() >= expected.items()
    # Made with kubectl and put into the project by its annotation: the operator labels it.
    by_hand = unique("byhand")
    core.create_namespace(
        k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=by_hand, annotations={ANNOTATION: project}))
    )
    wait_enforced(core, by_hand, "baseline")
    # Moved in through /v3: labelled by the move itself.
    outside = create_namespace(api, cluster, None)
    assert outside.status == 201, outside.body
    assert ENFORCE not in (outside.body["labels"] or {})
    moved = api.put(
        f"/v3/clusters/{cluster}/namespaces/{outside.body['name']}", {"projectId": project}
    )
    assert moved.status == 200, moved.body
    assert enforced(core, outside.body["name"]) == "baseline"
    members = (ns, by_hand, outside.body["name"])

    # The cluster's template decides for projects that say nothing; the System project,
    # whose namespaces run the cluster's own pods, stays privileged.
    changed = api.put(f"/v3/clusters/{cluster}", {TEMPLATE: "rancher-restricted"})
    assert changed.status == 200, changed.body
    for name in members:
        wait_enforced(core, name, "restricted")
    wait_enforced(core, "kube-system", "privileged")
    # A project's own level wins over its cluster's.
    own = api.put(f"/v3/projects/{project}", {"podSecurityLevel": "baseline"})
    assert (own.status, own.body["podSecurityLevel"]) == (200, "baseline"), own.body
    for name in members:
        wait_enforced(core, name, "baseline")
    # A hand edit does not last.
    core.patch_namespace(ns, {"metadata": {"labels": {ENFORCE: "privileged"}}})
    wait_enforced(core, ns, "baseline")


@dataclass
class Team:
    project: str
    namespace: str
    owner: Person
    member: Person


@pytest.fixture
def team(api: Api, cluster: str) -> Team:
    project = create_project(api, cluster)["id"]
    namespace = create_namespace(api, cluster, project).body["name"]
    owner, member = new_person(api), new_person(api)
    for person, role in ((owner, "project-owner"), (member, "project-member")):
        granted = api.post(
            "/v3/projectroletemplatebindings",
            {"projectId": project, "userId": person.id, "roleTemplateId": role},
        )
        assert granted.status == 201, granted.body
    wait_for("role bindings downstream", lambda: all_true(api, project), 60)
    return Team(project, namespace, owner, member)


def workload(namespace: str, name: str, **fields: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "example/app:1", **fields.pop("container", {})}
    return {"name": name, "namespaceId": namespace, "containers": [container], **fields}


def dangerous(namespace: str) -> dict[str, dict[str, Any]]:
    """What baseline exists to refuse, by the reason Kubernetes gives."""
    return {
        "privileged": workload(
            namespace, "privileged", container={"securityContext": {"privileged": True}}
        ),
        "hostPath volumes": workload(
            namespace,
            "hostpath",
            volumes=[{"name": "root", "hostPath": {"path": "/"}}],
            container={"volumeMounts": [{"name": "root", "mountPath": "/host"}]},
        ),
        "host namespaces": workload(namespace, "hostnet", hostNetwork=True),
    }


def test_a_members_privileged_hostpath_and_hostnetwork_pods_need_an_administrator(
    api: Api, team: Team, core: k8s.CoreV1Api, apps: k8s.AppsV1Api
) -> None:
    url = f"/v3/projects/{team.project}/workloads"
    wait_enforced(core, team.namespace, "baseline")
    for reason, body in dangerous(team.namespace).items():
        refused = team.member.api.post(url, body)
        assert (refused.status, refused.body.get("code")) == (422, "PodSecurity"), refused.body
        assert 'violates PodSecurity "baseline:latest"' in refused.body["message"], refused.body
        assert reason in refused.body["message"], refused.body
    assert apps.list_namespaced_deployment(team.namespace).items == []

    # Neither the member nor the project's owner may make it privileged.
    for person in (team.member, team.owner):
        loosened = person.api.put(
            f"/v3/projects/{team.project}", {"podSecurityLevel": "privileged"}
        )
        assert (loosened.status, loosened.body["code"]) == (403, "PermissionDenied"), loosened.body
    assert api.get(f"/v3/projects/{team.project}").body["podSecurityLevel"] == ""
    assert enforced(core, team.namespace) == "baseline"

    granted = api.put(f"/v3/projects/{team.project}", {"podSecurityLevel": "privileged"})
    assert (granted.status, granted.body["podSecurityLevel"]) == (200, "privileged")
    wait_enforced(core, team.namespace, "privileged")
    # The owner sending back what they read is no loosening.
    kept = team.owner.api.put(f"/v3/projects/{team.project}", {"podSecurityLevel": "privileged"})
    assert kept.status == 200, kept.body
    for body in dangerous(team.namespace).values():
        created = team.member.api.post(url, body)
        assert created.status == 201, created.body
    # What was asked for is what landed, and what GET shows.
    pod = apps.read_namespaced_deployment("hostnet", team.namespace).spec.template.spec
    assert pod.host_network is True
    shown = team.member.api.get(f"{url}/deployment:{team.namespace}:privileged").body
    assert shown["containers"][0]["securityContext"] == {"privileged": True}
    assert shown["hostNetwork"] is False


def test_an_owner_may_tighten_a_project_but_only_administrators_loosen(
    api: Api, cluster: str, team: Team, core: k8s.CoreV1Api, cluster_template: None
) -> None:
    project = f"/v3/projects/{team.project}"
    tightened = team.owner.api.put(project, {"podSecurityLevel": "restricted"})
    assert (tightened.status, tightened.body["podSecurityLevel"]) == (200, "restricted")
    wait_enforced(core, team.namespace, "restricted")
    for value in ("strict", "rancher-privileged", 3):
        bad = team.owner.api.put(project, {"podSecurityLevel": value})
        assert (bad.status, bad.body["code"], bad.body["fieldName"]) == (
            422, "InvalidOption", "podSecurityLevel"
        ), bad.body  # fmt: skip
    # Restricted everywhere in the cluster: baseline is a loosening now.
    assert api.put(f"/v3/clusters/{cluster}", {TEMPLATE: "corral-restricted"}).status == 200
    loosened = team.owner.api.put(project, {"podSecurityLevel": "baseline"})
    assert (loosened.status, loosened.body["code"]) == (403, "PermissionDenied"), loosened.body
    assert api.get(project).body["podSecurityLevel"] == "restricted"
    # Leaving it to the cluster is never a loosening.
    inherited = team.owner.api.put(project, {"podSecurityLevel": ""})
    assert (inherited.status, inherited.body["podSecurityLevel"]) == (200, ""), inherited.body
    wait_enforced(core, team.namespace, "restricted")


def test_cluster_templates_are_checked_and_privileged_is_for_administrators(
    api: Api, cluster: str, core: k8s.CoreV1Api, cluster_template: None
) -> None:
    owner = new_person(api)
    granted = api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": cluster, "userId": owner.id, "roleTemplateId": "cluster-owner"},
    )
    assert granted.status == 201, granted.body
    url = f"/v3/clusters/{cluster}"
    wait_for("the cluster owner's binding", lambda: owner.api.get(url).status == 200, 10)
    for name in ("rancher-privileged", "corral-privileged", "privileged"):
        refused = owner.api.put(url, {TEMPLATE: name})
        assert (refused.status, refused.body["code"]) == (403, "PermissionDenied"), refused.body
    unknown = owner.api.put(url, {TEMPLATE: "my-own-template"})
    assert (unknown.status, unknown.body["code"], unknown.body["fieldName"]) == (
        422, "InvalidOption", TEMPLATE
    ), unknown.body  # fmt: skip
    assert (api.get(url).body.get(TEMPLATE) or "") == ""
    tightened = owner.api.put(url, {TEMPLATE: "rancher-restricted"})
    assert (tightened.status, tightened.body[TEMPLATE]) == (200, "rancher-restricted")
    wait_enforced(core, "default", "restricted")  # the Default project's namespace
    # What an administrator set, the owner may send back unchanged.
    assert api.put(url, {TEMPLATE: "rancher-privileged"}).status == 200
    kept = owner.api.put(url, {TEMPLATE: "rancher-privileged", "description": "kept"})
    assert (kept.status, kept.body[TEMPLATE]) == (200, "rancher-privileged"), kept.body


RESTRICTED_POD = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
}
RESTRICTED_CONTAINER = {
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsUser": 1000,
    },
}


def test_security_contexts_reach_the_pod_and_unknown_fields_are_refused(
    api: Api, cluster: str, core: k8s.CoreV1Api, apps: k8s.AppsV1Api
) -> None:
    project = create_project(api, cluster, podSecurityLevel="restricted")["id"]
    namespace = create_namespace(api, cluster, project).body["name"]
    url = f"/v3/projects/{project}/workloads"
    plain = api.post(url, workload(namespace, "plain"))
    assert (plain.status, plain.body.get("code")) == (422, "PodSecurity"), plain.body
    assert 'violates PodSecurity "restricted:latest"' in plain.body["message"]
    # The same workload with the security contexts restricted asks for is admitted: they were
    # written onto the pod, not dropped.
    body = workload(namespace, "hardened", container=RESTRICTED_CONTAINER, **RESTRICTED_POD)
    created = api.post(url, body)
    assert created.status == 201, created.body
    pod = apps.read_namespaced_deployment("hardened", namespace).spec.template.spec
    assert pod.security_context.run_as_non_root is True
    assert pod.containers[0].security_context.capabilities.drop == ["ALL"]
    read = api.get(f"{url}/{created.body['id']}").body
    assert read["securityContext"] == RESTRICTED_POD["securityContext"]
    assert read["containers"][0]["securityContext"] == RESTRICTED_CONTAINER["securityContext"]
    # What a GET shows may be sent back whole.
    again = api.put(f"{url}/{created.body['id']}", read)
    assert again.status == 200, again.body
    assert again.body["securityContext"] == RESTRICTED_POD["securityContext"]
    # A PUT that would break the level is refused the same way, and changes nothing.
    broken = api.put(f"{url}/{created.body['id']}", {"hostPID": True})
    assert (broken.status, broken.body.get("code")) == (422, "PodSecurity"), broken.body
    assert apps.read_namespaced_deployment("hardened", namespace).spec.template.spec.host_pid in (
        None, False
    )  # fmt: skip
    # A field corral does not write is refused naming it, never silently dropped.
    for field, extra in (("hostPort", {"hostPort": 80}), ("dnsPolicy", {"dnsPolicy": "None"})):
        refused = api.post(url, {**workload(namespace, "extra"), **extra})
        assert (refused.status, refused.body["fieldName"]) == (422, field), refused.body
    assert [d.metadata.name for d in apps.list_namespaced_deployment(namespace).items] == [
        "hardened"
    ]
