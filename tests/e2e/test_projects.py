"""Projects, namespaces, quotas, role bindings, network isolation and project events, through
/v3 and the kubeconfig proxy, checked in the management and downstream clusters with the
official client."""

from __future__ import annotations

import base64
import datetime
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person, new_person

CONDITIONS = (
    "BackingNamespaceCreated",
    "CreatorMadeOwner",
    "DefaultNetworkPolicyCreated",
    "InitialRolesPopulated",
)
ANNOTATION = "field.svc.io/projectId"


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def conditions_of(api: Api, project_id: str) -> dict[str, str]:
    body = api.get(f"/v3/projects/{project_id}").body
    return {c["type"]: c["status"] for c in body["status"].get("conditions", [])}


def all_true(api: Api, project_id: str) -> bool:
    found = conditions_of(api, project_id)
    return all(found.get(t) == "True" for t in CONDITIONS)


def create_project(api: Api, cluster: str, **fields: object) -> dict:
    created = api.post(
        "/v3/projects", {"type": "project", "name": unique("proj"), "clusterId": cluster, **fields}
    )
    assert created.status == 201, created.body
    return created.body


def create_namespace(api: Api, cluster: str, project_id: str | None, name: str | None = None):
    body = {"type": "namespace", "name": name or unique("ns"), "projectId": project_id}
    return api.post(f"/v3/clusters/{cluster}/namespaces", body)


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def core(downstream: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(downstream)


# -- the projects every cluster gets ------------------------------------------------------------


def test_every_cluster_gets_a_default_and_a_system_project(
    api: Api, cluster: str, core: k8s.CoreV1Api
) -> None:
    def named(name: str) -> dict | None:
        projects = api.get(f"/v3/projects?clusterId={cluster}").body["data"]
        return next((p for p in projects if p["name"] == name), None)

    default = wait_for("the Default project", lambda: named("Default"), 60)
    system = wait_for("the System project", lambda: named("System"), 60)
    assert wait_for("their conditions", lambda: all_true(api, system["id"]), 60)
    annotations = {
        n.metadata.name: (n.metadata.annotations or {}) for n in core.list_namespace().items
    }
    assert annotations["default"][ANNOTATION] == default["id"]
    for name in ("kube-system", "kube-public", "kube-node-lease", "svc-system"):
        assert annotations[name][ANNOTATION] == system["id"], name
    listed = api.get(f"/v3/clusters/{cluster}/namespaces?projectId={system['id']}").body
    assert {"kube-system", "svc-system"} <= {n["name"] for n in listed["data"]}
    refused = api.delete(f"/v3/projects/{system['id']}")
    assert (refused.status, refused.body["code"]) == (422, "InvalidAction")


# -- a project's life ---------------------------------------------------------------------------


def test_a_project_reaches_its_conditions_and_its_creator_owns_it(
    api: Api, cluster: str, management: k8s.ApiClient, crs: k8s.CustomObjectsApi
) -> None:
    project = create_project(api, cluster, description="team a")
    pid = project["id"]
    assert pid.startswith(f"{cluster}:p-") and project["type"] == "project"
    assert project["links"]["namespaces"].endswith(
        f"/v3/clusters/{cluster}/namespaces?projectId={pid}"
    )
    assert wait_for("all conditions true", lambda: all_true(api, pid), 60)
    got = api.get(f"/v3/projects/{pid}").body
    assert got["state"] == "active"
    backing = got["status"]["backingNamespace"]
    assert backing == f"{cluster}-{pid.split(':')[1]}"
    labels = k8s.CoreV1Api(management).read_namespace(backing).metadata.labels
    assert labels["management.svc.io/project"] == pid.split(":")[1]
    bindings = crs.list_namespaced_custom_object(
        "management.svc.io", "v3", backing, "projectroletemplatebindings"
    )["items"]
    assert [(b["spec"]["userName"], b["spec"]["roleTemplateName"]) for b in bindings] == [
        ("u-admin", "project-owner")
    ]
    listed = api.get("/v3/projectroletemplatebindings", headers={}).body["data"]
    assert any(b["projectId"] == pid and b["roleTemplateId"] == "project-owner" for b in listed)

    changed = api.put(f"/v3/projects/{pid}", {"name": "renamed", "clusterId": cluster})
    assert changed.status == 200 and changed.body["displayName"] == "renamed"
    moved = api.put(f"/v3/projects/{pid}", {"clusterId": "local"})
    assert (moved.status, moved.body["fieldName"]) == (422, "clusterId")
    assert api.get(f"/v3/projects/{pid}").body["clusterId"] == cluster


def test_bad_project_input_is_refused_and_stores_nothing(
    api: Api, cluster: str, crs: k8s.CustomObjectsApi
) -> None:
    before = len(
        crs.list_namespaced_custom_object("management.svc.io", "v3", cluster, "projects")["items"]
    )
    cases = [
        ({"name": "x", "clusterId": "c-nothere"}, "clusterId", "InvalidReference"),
        ({"name": "x"}, "clusterId", "MissingRequired"),
        ({"clusterId": cluster}, "displayName", "MissingRequired"),
        (
            {
                "name": "x",
                "clusterId": cluster,
                "resourceQuota": {"limit": {"limitsCpu": "lots"}},
                "namespaceDefaultResourceQuota": {"limit": {"limitsCpu": "1"}},
            },
            "resourceQuota.limit.limitsCpu",
            "InvalidFormat",
        ),
        (
            {"name": "x", "clusterId": cluster, "resourceQuota": {"limit": {"pods": "10"}}},
            "namespaceDefaultResourceQuota.limit",
            "InvalidFormat",
        ),
        (
            {
                "name": "x",
                "clusterId": cluster,
                "resourceQuota": {"limit": {"pods": "10"}},
                "namespaceDefaultResourceQuota": {"limit": {"pods": "20"}},
            },
            "namespaceDefaultResourceQuota.limit",
            "InvalidFormat",
        ),
        (
            {
                "name": "x",
                "clusterId": cluster,
                "resourceQuota": {"limit": {"gpus": "1"}},
                "namespaceDefaultResourceQuota": {"limit": {"gpus": "1"}},
            },
            "resourceQuota.limit.gpus",
            "InvalidBodyContent",
        ),
        (
            {
                "name": "x",
                "clusterId": cluster,
                "containerDefaultResourceLimit": {"requestsCpu": "2", "limitsCpu": "1"},
            },
            "containerDefaultResourceLimit.requestsCpu",
            "InvalidFormat",
        ),
    ]
    for body, field, code in cases:
        refused = api.post("/v3/projects", {"type": "project", **body})
        assert (refused.status, refused.body.get("fieldName"), refused.body["code"]) == (
            422,
            field,
            code,
        ), body
    after = crs.list_namespaced_custom_object("management.svc.io", "v3", cluster, "projects")[
        "items"
    ]
    assert len(after) == before


# -- namespaces and quotas ----------------------------------------------------------------------

QUOTA = {
    "resourceQuota": {"limit": {"limitsCpu": "1", "limitsMemory": "1Gi", "pods": "10"}},
    "namespaceDefaultResourceQuota": {
        "limit": {"limitsCpu": "500m", "limitsMemory": "512Mi", "pods": "5"}
    },
    "containerDefaultResourceLimit": {
        "limitsCpu": "200m",
        "limitsMemory": "128Mi",
        "requestsCpu": "100m",
        "requestsMemory": "64Mi",
    },
}


def test_quotas_follow_namespaces_and_refuse_what_does_not_fit(
    api: Api, cluster: str, core: k8s.CoreV1Api, request: pytest.FixtureRequest
) -> None:
    full = create_project(api, cluster, **QUOTA)["id"]
    other = create_project(api, cluster, **QUOTA)["id"]
    first = create_namespace(api, cluster, full)
    assert first.status == 201, first.body
    assert first.body["projectId"] == full
    ns = first.body["name"]
    downstream_ns = core.read_namespace(ns)
    assert downstream_ns.metadata.annotations[ANNOTATION] == full
    assert downstream_ns.metadata.labels["field.svc.io/projectId"] == full.split(":")[1]

    quota = wait_for(
        "the namespace quota",
        lambda: core.read_namespaced_resource_quota("corral-project-quota", ns),
        30,
    )
    assert quota.spec.hard == {"limits.cpu": "500m", "limits.memory": "512Mi", "pods": "5"}
    wait_for(
        "the container defaults",
        lambda: core.read_namespaced_limit_range("corral-container-defaults", ns),
        30,
    )
    pod = core.create_namespaced_pod(
        ns,
        k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(name="plain"),
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox")]),
        ),
    )
    # A pod without a controller would block the drains of later tests on its node.
    request.addfinalizer(lambda: remove_pod(core, ns, "plain"))
    resources = pod.spec.containers[0].resources
    assert resources.limits == {"cpu": "200m", "memory": "128Mi"}
    assert resources.requests == {"cpu": "100m", "memory": "64Mi"}

    second = create_namespace(api, cluster, full)
    assert second.status == 201, second.body
    before = {n.metadata.name for n in core.list_namespace().items}
    third = create_namespace(api, cluster, full)
    assert (third.status, third.body["code"]) == (422, "QuotaExceeded")
    assert "limitsCpu: 3 namespace(s) x 500m = 1500m exceeds the limit 1" in third.body["message"]
    assert {n.metadata.name for n in core.list_namespace().items} == before

    # Moving a namespace in is checked the same way, and changes nothing when refused.
    outsider = create_namespace(api, cluster, other).body["name"]
    moved = api.put(f"/v3/clusters/{cluster}/namespaces/{outsider}", {"projectId": full})
    assert (moved.status, moved.body["code"]) == (422, "QuotaExceeded")
    assert core.read_namespace(outsider).metadata.annotations[ANNOTATION] == other

    # Out of the project: its quota goes with it. Then the other namespace fits.
    out = api.put(f"/v3/clusters/{cluster}/namespaces/{second.body['name']}", {"projectId": ""})
    assert out.status == 200 and out.body["projectId"] is None
    assert ANNOTATION not in (core.read_namespace(second.body["name"]).metadata.annotations or {})
    wait_for(
        "the quota to leave with the namespace",
        lambda: not core.list_namespaced_resource_quota(second.body["name"]).items,
        30,
    )
    moved = api.put(f"/v3/clusters/{cluster}/namespaces/{outsider}", {"projectId": full})
    assert moved.status == 200, moved.body
    assert core.read_namespace(outsider).metadata.annotations[ANNOTATION] == full

    # Usage sums the namespaces' ResourceQuota status.
    def usage() -> dict | None:
        found = api.get(f"/v3/projects/{full}?include=usage").body["usage"]
        return (
            found
            if found["used"].get("pods") == "1" and found["hard"].get("pods") == "10"
            else None
        )

    found = wait_for("usage of the project", usage, 30)
    assert found["namespaces"] == 2 and found["used"]["limitsCpu"] == "200m"
    assert found["hard"] == {"limitsCpu": "1", "limitsMemory": "1Gi", "pods": "10"}

    # A limit lower than what the namespaces are allotted, or already use, is refused.
    tight = {"resourceQuota": {"limit": {"limitsCpu": "750m", "limitsMemory": "1Gi", "pods": "10"}}}
    refused = api.put(f"/v3/projects/{full}", tight)
    assert (refused.status, refused.body["code"]) == (422, "QuotaExceeded")
    assert "2 namespace(s) x 500m = 1 exceeds the limit 750m" in refused.body["message"]
    small = {
        "namespaceDefaultResourceQuota": {
            "limit": {"limitsCpu": "100m", "limitsMemory": "512Mi", "pods": "5"}
        }
    }
    refused = api.put(f"/v3/projects/{full}", small)
    assert (refused.status, refused.body["code"]) == (422, "QuotaExceeded")
    assert f"namespace {ns} already uses = 200m exceeds the limit 100m" in refused.body["message"]
    assert (
        core.read_namespaced_resource_quota("corral-project-quota", ns).spec.hard["limits.cpu"]
        == "500m"
    )

    # A larger default is applied to every namespace of the project.
    wider = {
        "resourceQuota": {"limit": {"limitsCpu": "2", "limitsMemory": "2Gi", "pods": "20"}},
        "namespaceDefaultResourceQuota": {
            "limit": {"limitsCpu": "1", "limitsMemory": "1Gi", "pods": "10"}
        },
    }
    assert api.put(f"/v3/projects/{full}", wider).status == 200
    for name in (ns, outsider):
        wait_for(
            "the wider quota",
            lambda n=name: (
                core.read_namespaced_resource_quota("corral-project-quota", n).spec.hard[
                    "limits.cpu"
                ]
                == "1"
            ),
            30,
        )


def remove_pod(core: k8s.CoreV1Api, namespace: str, name: str) -> None:
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(
        f"pod {namespace}/{name} gone",
        lambda: name not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items},
        30,
    )


def test_a_namespace_deleted_and_made_again_gets_its_quota_again(
    api: Api, cluster: str, core: k8s.CoreV1Api
) -> None:
    project = create_project(api, cluster, **QUOTA)["id"]
    name = create_namespace(api, cluster, project).body["name"]

    def quota() -> object:
        return core.read_namespaced_resource_quota("corral-project-quota", name)

    wait_for("the namespace quota", quota, 30)
    assert api.delete(f"/v3/clusters/{cluster}/namespaces/{name}").status == 204

    def gone() -> bool:
        try:
            core.read_namespace(name)
        except k8s.ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the namespace deleted", gone, 60)
    # The API server's watch may see the deletion a moment after the cluster's API does.
    wait_for("made again", lambda: create_namespace(api, cluster, project, name).status == 201, 10)
    # Well within the operator's one-minute relisting of what it manages.
    wait_for("the quota in the new namespace", quota, 20)


def test_bad_namespace_input_is_refused(api: Api, cluster: str) -> None:
    project = create_project(api, cluster)["id"]
    cases = [
        ({"name": "Not_A_Name", "projectId": project}, 422, "name"),
        ({"name": "x" * 64, "projectId": project}, 422, "name"),
        ({"projectId": project}, 422, "name"),
        ({"name": unique("ns"), "projectId": "local:p-nothere"}, 422, "projectId"),
        ({"name": unique("ns"), "projectId": f"{cluster}:p-nothere"}, 422, "projectId"),
        ({"name": "default", "projectId": project}, 409, None),
    ]
    for body, status, field in cases:
        refused = api.post(f"/v3/clusters/{cluster}/namespaces", {"type": "namespace", **body})
        assert (refused.status, refused.body.get("fieldName")) == (status, field), body
    missing = api.put(f"/v3/clusters/{cluster}/namespaces/nothere", {"projectId": project})
    assert missing.status == 404
    for path in (
        f"/v3/clusters/{cluster}/namespaces",
        "/v3/projects",
        "/v3/projectroletemplatebindings",
        "/v3/clusterroletemplatebindings",
    ):
        garbled = api.request(
            "POST", path, raw=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert (garbled.status, garbled.body["code"]) == (400, "InvalidBodyContent"), path
    unknown = api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": f"{cluster}:p-nothere", "userId": "u-admin", "roleTemplateId": "read-only"},
    )
    assert (unknown.status, unknown.body["fieldName"]) == (422, "projectId")


# -- roles and authorization --------------------------------------------------------------------


@dataclass
class Team:
    project: str
    owner: Person
    member: Person
    reader: Person
    outsider: Person
    namespace: str


@pytest.fixture(scope="module")
def team(api: Api, cluster: str) -> Team:
    project = create_project(api, cluster)["id"]
    namespace = create_namespace(api, cluster, project).body["name"]
    people = {role: new_person(api) for role in ("project-owner", "project-member", "read-only")}
    for role, person in people.items():
        granted = api.post(
            "/v3/projectroletemplatebindings",
            {
                "type": "projectRoleTemplateBinding",
                "projectId": project,
                "userId": person.id,
                "roleTemplateId": role,
            },
        )
        assert granted.status == 201, granted.body
    team = Team(
        project,
        people["project-owner"],
        people["project-member"],
        people["read-only"],
        new_person(api),
        namespace,
    )
    wait_for("role bindings downstream", lambda: all_true(api, project), 60)
    return team


def kubeconfig_token(person: Person, cluster: str) -> str:
    generated = person.api.post(f"/v3/clusters/{cluster}?action=generateKubeconfig")
    assert generated.status == 200, generated.body
    config = yaml.safe_load(base64.b64decode(generated.body["config"]))
    return str(config["users"][0]["user"]["token"])


def test_each_role_sees_and_changes_exactly_what_it_gives(
    api: Api, cluster: str, team: Team, core: k8s.CoreV1Api
) -> None:
    project, ns = team.project, team.namespace
    for person in (team.owner, team.member, team.reader):
        assert person.api.get(f"/v3/projects/{project}").status == 200
        listed = person.api.get("/v3/projects").body["data"]
        assert [p["id"] for p in listed] == [project]
        names = person.api.get(f"/v3/clusters/{cluster}/namespaces?projectId={project}").body
        assert [n["name"] for n in names["data"]] == [ns]
        assert person.api.get(f"/v3/clusters/{cluster}").status == 200
        assert person.api.get(f"/v3/clusters/{cluster}/nodes").status == 403

    # Namespaces: owners and members create them, readers may not.
    assert create_namespace(team.member.api, cluster, project).status == 201
    assert create_namespace(team.owner.api, cluster, project).status == 201
    assert create_namespace(team.reader.api, cluster, project).status == 403
    assert create_namespace(team.member.api, cluster, None).status == 403

    # The project and its bindings: owners only.
    for person in (team.member, team.reader):
        assert person.api.put(f"/v3/projects/{project}", {"description": "x"}).status == 403
        grant = person.api.post(
            "/v3/projectroletemplatebindings",
            {"projectId": project, "userId": team.outsider.id, "roleTemplateId": "read-only"},
        )
        assert grant.status == 403
        assert person.api.delete(f"/v3/projects/{project}").status == 403
    assert team.owner.api.put(f"/v3/projects/{project}", {"description": "ours"}).status == 200

    # The outsider cannot even learn that the project exists.
    outsider = team.outsider.api
    for path in (
        f"/v3/projects/{project}",
        f"/v3/projects/{project}/events",
        f"/v3/clusters/{cluster}",
        f"/v3/clusters/{cluster}/namespaces",
        f"/v3/clusters/{cluster}/namespaces/{ns}",
    ):
        found = outsider.get(path)
        assert (found.status, found.body["code"]) == (404, "NotFound"), path
    assert outsider.get("/v3/projects").body["data"] == []
    assert outsider.get("/v3/projectroletemplatebindings").body["data"] == []
    assert outsider.put(f"/v3/projects/{project}", {"description": "x"}).status == 404
    assert create_namespace(outsider, cluster, project).status == 404
    assert outsider.post(f"/v3/clusters/{cluster}?action=generateKubeconfig").status == 404

    # Downstream, each binding is a RoleBinding to Kubernetes' own role in the namespace.
    rbac = k8s.RbacAuthorizationV1Api(core.api_client)
    bound = {
        (b.subjects[0].name, b.role_ref.name)
        for b in rbac.list_namespaced_role_binding(ns).items
        if b.metadata.labels and b.metadata.labels.get("app.kubernetes.io/managed-by") == "corral"
    }
    assert {
        (team.owner.id, "admin"),
        (team.member.id, "edit"),
        (team.reader.id, "view"),
        ("u-admin", "admin"),
    } == bound


def test_the_kubeconfig_proxy_applies_the_same_roles(api: Api, cluster: str, team: Team) -> None:
    ns = team.namespace
    configmaps = f"/k8s/clusters/{cluster}/api/v1/namespaces/{ns}/configmaps"

    def configmap(name: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}

    member = api.as_token(kubeconfig_token(team.member, cluster))
    reader = api.as_token(kubeconfig_token(team.reader, cluster))
    owner = api.as_token(kubeconfig_token(team.owner, cluster))
    assert member.post(configmaps, configmap(unique("m"))).status == 201
    assert reader.get(configmaps).status == 200
    assert reader.post(configmaps, configmap(unique("r"))).status == 403
    roles = (
        f"/k8s/clusters/{cluster}/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"
    )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": unique("rb")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "someone"}],
    }
    assert owner.post(roles, binding).status == 201
    assert member.post(roles, binding | {"metadata": {"name": unique("rb")}}).status == 403
    # Other namespaces of the cluster are not theirs.
    assert (
        member.get(f"/k8s/clusters/{cluster}/api/v1/namespaces/kube-system/configmaps").status
        == 403
    )


def test_revoking_a_binding_removes_its_access(api: Api, cluster: str, team: Team) -> None:
    extra = new_person(api)
    granted = team.owner.api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": team.project, "userId": extra.id, "roleTemplateId": "read-only"},
    )
    assert granted.status == 201, granted.body
    again = team.owner.api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": team.project, "userId": extra.id, "roleTemplateId": "read-only"},
    )
    assert (again.status, again.body["code"]) == (409, "AlreadyExists")
    bad = team.owner.api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": team.project, "userId": extra.id, "roleTemplateId": "god"},
    )
    assert (bad.status, bad.body["code"], bad.body["fieldName"]) == (
        422,
        "InvalidOption",
        "roleTemplateId",
    )
    nobody = team.owner.api.post(
        "/v3/projectroletemplatebindings",
        {"projectId": team.project, "userId": "u-nobody", "roleTemplateId": "read-only"},
    )
    assert (nobody.status, nobody.body["fieldName"]) == (422, "userId")

    assert extra.api.get(f"/v3/projects/{team.project}").status == 200
    assert (
        team.owner.api.delete(f"/v3/projectroletemplatebindings/{granted.body['id']}").status == 204
    )
    assert extra.api.get(f"/v3/projects/{team.project}").status == 404


def test_cluster_roles_give_the_cluster_and_new_projects(
    api: Api, cluster: str, team: Team, core: k8s.CoreV1Api
) -> None:
    member, owner = new_person(api), new_person(api)
    for person, role in ((member, "cluster-member"), (owner, "cluster-owner")):
        granted = api.post(
            "/v3/clusterroletemplatebindings",
            {
                "type": "clusterRoleTemplateBinding",
                "clusterId": cluster,
                "userId": person.id,
                "roleTemplateId": role,
            },
        )
        assert granted.status == 201, granted.body
    refused = team.owner.api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": cluster, "userId": team.outsider.id, "roleTemplateId": "cluster-owner"},
    )
    assert refused.status == 403

    before = len(api.get(f"/v3/clusterroletemplatebindings?clusterId={cluster}").body["data"])
    for body, field, code in (
        (
            {"clusterId": "c-nothere", "userId": member.id, "roleTemplateId": "cluster-member"},
            "clusterId",
            "InvalidReference",
        ),
        (
            {"clusterId": cluster, "userId": member.id, "roleTemplateId": "cluster-god"},
            "roleTemplateId",
            "InvalidOption",
        ),
        ({"clusterId": cluster, "userId": member.id}, "roleTemplateId", "MissingRequired"),
        (
            {"clusterId": cluster, "userId": "u-nobody", "roleTemplateId": "cluster-member"},
            "userId",
            "InvalidReference",
        ),
    ):
        refused = api.post("/v3/clusterroletemplatebindings", body)
        assert (refused.status, refused.body.get("fieldName"), refused.body["code"]) == (
            422,
            field,
            code,
        ), body
    again = api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": cluster, "userId": member.id, "roleTemplateId": "cluster-member"},
    )
    assert (again.status, again.body["code"]) == (409, "AlreadyExists")
    after = api.get(f"/v3/clusterroletemplatebindings?clusterId={cluster}").body["data"]
    assert len(after) == before

    assert member.api.get(f"/v3/clusters/{cluster}/nodes").status == 200
    assert member.api.get(f"/v3/projects/{team.project}").status == 404
    assert member.api.put(f"/v3/clusters/{cluster}", {"description": "x"}).status == 403
    own = member.api.post("/v3/projects", {"name": unique("mine"), "clusterId": cluster})
    assert own.status == 201, own.body
    assert wait_for("the creator made owner", lambda: all_true(member.api, own.body["id"]), 60)
    assert member.api.put(f"/v3/projects/{own.body['id']}", {"description": "mine"}).status == 200

    assert owner.api.get(f"/v3/projects/{team.project}").status == 200
    assert owner.api.put(f"/v3/projects/{team.project}", {"description": "owned"}).status == 200
    rbac = k8s.RbacAuthorizationV1Api(core.api_client)
    bound = wait_for(
        "cluster role bindings downstream",
        lambda: (
            {
                (b.subjects[0].name, b.role_ref.name)
                for b in rbac.list_cluster_role_binding(
                    label_selector="app.kubernetes.io/managed-by=corral"
                ).items
            }
            or None
        ),
        30,
    )
    assert {(member.id, "corral-cluster-member"), (owner.id, "cluster-admin")} <= bound

    # Deleting a user removes their bindings and with them their access.
    assert api.delete(f"/v3/users/{member.id}").status == 204
    wait_for(
        "the member's binding to go",
        lambda: (
            not any(
                b["userId"] == member.id
                for b in api.get(f"/v3/clusterroletemplatebindings?clusterId={cluster}").body[
                    "data"
                ]
            )
        ),
        30,
    )


# -- network isolation --------------------------------------------------------------------------


@pytest.fixture
def isolated(api: Api, cluster: str) -> Iterator[None]:
    assert api.put(f"/v3/clusters/{cluster}", {"enableNetworkPolicy": True}).status == 200
    yield
    assert api.put(f"/v3/clusters/{cluster}", {"enableNetworkPolicy": False}).status == 200


def test_network_policies_isolate_projects_and_follow_namespaces(
    api: Api, cluster: str, downstream: k8s.ApiClient, isolated: None
) -> None:
    networking = k8s.NetworkingV1Api(downstream)
    a = create_project(api, cluster)["id"]
    b = create_project(api, cluster)["id"]
    ns_a = create_namespace(api, cluster, a).body["name"]
    ns_b = create_namespace(api, cluster, b).body["name"]

    def sources(ns: str) -> list[str] | None:
        try:
            policy = networking.read_namespaced_network_policy("corral-project-isolation", ns)
        except k8s.ApiException:
            return None
        assert (
            policy.spec.policy_types == ["Ingress"]
            and policy.spec.pod_selector.match_labels is None
        )
        return [
            p.namespace_selector.match_labels["field.svc.io/projectId"]
            for p in policy.spec.ingress[0]._from
        ]

    system = next(
        p
        for p in api.get(f"/v3/projects?clusterId={cluster}").body["data"]
        if p["name"] == "System"
    )["id"].split(":")[1]
    assert wait_for("policy of a", lambda: sources(ns_a), 30) == [a.split(":")[1], system]
    assert wait_for("policy of b", lambda: sources(ns_b), 30) == [b.split(":")[1], system]
    assert sources("kube-system") is None  # the System project is reachable by every project
    assert wait_for(
        "the condition", lambda: conditions_of(api, a)["DefaultNetworkPolicyCreated"] == "True", 30
    )

    # An explicit policy still widens access: corral leaves it alone.
    extra = k8s.V1NetworkPolicy(
        metadata=k8s.V1ObjectMeta(name="allow-all"),
        spec=k8s.V1NetworkPolicySpec(
            pod_selector=k8s.V1LabelSelector(), ingress=[k8s.V1NetworkPolicyIngressRule()]
        ),
    )
    networking.create_namespaced_network_policy(ns_a, extra)

    assert api.put(f"/v3/clusters/{cluster}/namespaces/{ns_b}", {"projectId": a}).status == 200
    assert wait_for("b's namespace joins a", lambda: sources(ns_b) == [a.split(":")[1], system], 30)

    assert api.put(f"/v3/clusters/{cluster}", {"enableNetworkPolicy": False}).status == 200
    assert wait_for("policies removed", lambda: sources(ns_a) is None and sources(ns_b) is None, 30)
    assert networking.read_namespaced_network_policy("allow-all", ns_a).metadata.name == "allow-all"


# -- events and deletion ------------------------------------------------------------------------


def test_project_events_are_newest_first(
    api: Api, cluster: str, core: k8s.CoreV1Api, team: Team
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    note = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name=unique("note")),
        involved_object=k8s.V1ObjectReference(
            kind="ConfigMap", name="settings", namespace=team.namespace
        ),
        reason="Tested",
        message="something happened in the namespace",
        type="Warning",
        source=k8s.V1EventSource(component="e2e"),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    core.create_namespaced_event(team.namespace, note)
    elsewhere = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name=unique("note")),
        involved_object=k8s.V1ObjectReference(
            kind="ConfigMap", name="settings", namespace="default"
        ),
        reason="NotTheirs",
        message="another project's namespace",
        type="Normal",
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    core.create_namespaced_event("default", elsewhere)
    events = wait_for(
        "the namespace's event",
        lambda: [
            e
            for e in team.reader.api.get(f"/v3/projects/{team.project}/events").body["data"]
            if e["reason"] == "Tested"
        ],
        30,
    )
    assert events[0]["namespaceId"] == team.namespace and events[0]["origin"] == "cluster"
    assert events[0]["eventType"] == "Warning" and events[0]["type"] == "event"

    # The operator posts the project's own events after the conditions `team` waited for.
    def with_own_events() -> dict | None:
        body: dict = api.get(f"/v3/projects/{team.project}/events").body
        own = {e["reason"] for e in body["data"] if e["origin"] == "project"}
        return body if {"BackingNamespaceCreated", "InitialRolesPopulated"} <= own else None

    body = wait_for("the project's own events", with_own_events, 30)
    assert body["type"] == "collection" and body["resourceType"] == "event"
    stamps = [e["lastTimestamp"] for e in body["data"]]
    assert stamps == sorted(stamps, reverse=True)
    assert "NotTheirs" not in {e["reason"] for e in body["data"]}


def test_deleting_a_project_deletes_its_namespaces(
    api: Api, cluster: str, core: k8s.CoreV1Api, management: k8s.ApiClient
) -> None:
    pid = create_project(api, cluster)["id"]
    names = [create_namespace(api, cluster, pid).body["name"] for _ in range(2)]
    assert wait_for("conditions", lambda: all_true(api, pid), 60)
    backing = api.get(f"/v3/projects/{pid}").body["status"]["backingNamespace"]
    assert api.delete(f"/v3/projects/{pid}").status == 204

    def gone(name: str, api_: k8s.CoreV1Api) -> bool:
        try:
            found = api_.read_namespace(name)
        except k8s.ApiException as exc:
            return exc.status == 404
        return found.status.phase == "Terminating"

    for name in names:
        assert wait_for(f"namespace {name} deleted", lambda n=name: gone(n, core), 60)
    assert wait_for(
        "backing namespace deleted", lambda: gone(backing, k8s.CoreV1Api(management)), 60
    )
    assert wait_for("the project gone", lambda: api.get(f"/v3/projects/{pid}").status == 404, 60)
