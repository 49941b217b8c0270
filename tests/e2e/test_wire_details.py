"""Issue 15's wire details through HTTPS: bindings show the spec's create fields, a cluster of
only a name waits for an import (and takes one by PUT), agent settings are kept whole,
"already exists" is 409 and nothing else is, and deprecated values are marked."""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.controlplane import ControlPlane
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person

GROUP, VERSION = "management.svc.io", "v3"


def encoded(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def condition(cluster: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def waiting_cluster(api: Api, **fields: Any) -> dict[str, Any]:
    created = api.post("/v3/clusters", {"type": "cluster", "name": f"w-{secrets.token_hex(3)}",
                                        **fields})  # fmt: skip
    assert created.status == 201, created.body
    return dict(created.body)


@pytest.fixture(scope="module")
def demo_cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


# -- role bindings ----------------------------------------------------------------------------


def test_bindings_show_the_create_fields_of_the_spec(
    api: Api, make_user: Callable[..., Person], demo_cluster: str
) -> None:
    person = make_user()
    crtb = api.post("/v3/clusterroletemplatebindings", {
        "type": "clusterRoleTemplateBinding", "clusterName": demo_cluster,
        "userName": person.id, "roleTemplateName": "cluster-member",
    })  # fmt: skip
    assert crtb.status == 201, crtb.body
    project = api.post("/v3/projects", {"type": "project", "name": f"p-{secrets.token_hex(3)}",
                                        "clusterId": demo_cluster})  # fmt: skip
    assert project.status == 201, project.body
    prtb = api.post("/v3/projectroletemplatebindings", {
        "type": "projectRoleTemplateBinding", "projectName": project.body["id"],
        "userName": person.id, "roleTemplateName": "project-member",
    })  # fmt: skip
    assert prtb.status == 201, prtb.body
    expected = {"projectName": project.body["id"], "userName": person.id,
                "roleTemplateName": "project-member", "projectId": project.body["id"],
                "userId": person.id, "roleTemplateId": "project-member"}  # fmt: skip
    listed = api.get(f"/v3/projectroletemplatebindings?projectId={project.body['id']}")
    mine = [b for b in listed.body["data"] if b["id"] == prtb.body["id"]]
    for shown in (prtb.body, api.get(f"/v3/projectroletemplatebindings/{prtb.body['id']}").body,
                  *mine):  # fmt: skip
        assert {k: shown[k] for k in expected} == expected
    assert {k: crtb.body[k] for k in ("clusterName", "userName", "roleTemplateName")} == {
        "clusterName": demo_cluster, "userName": person.id, "roleTemplateName": "cluster-member",
    }  # fmt: skip
    # The names filter like every field.
    assert [
        b["id"]
        for b in api.get(f"/v3/projectroletemplatebindings?userName={person.id}").body["data"]
    ] == [prtb.body["id"]]
    api.delete(f"/v3/projects/{project.body['id']}")


# -- a cluster of only a name -----------------------------------------------------------------


def test_a_cluster_of_only_a_name_waits_for_an_import_and_takes_it_by_put(
    api: Api, stack: Environment, crs: k8s.CustomObjectsApi, management: k8s.ApiClient,
    add_downstream: Callable[..., ControlPlane],
) -> None:  # fmt: skip
    cluster = waiting_cluster(api)
    cluster_id = cluster["id"]
    assert cluster_id.startswith("c-") and not cluster_id.startswith("c-m-")
    assert (cluster["driver"], cluster["state"]) == ("imported", "pending")
    pending = wait_for("Pending WaitingForCredential", lambda: (
        c := condition(api.get(f"/v3/clusters/{cluster_id}").body, "Pending")
    ).get("reason") == "WaitingForCredential" and c, 30)  # fmt: skip
    assert pending["status"] == "True" and "PUT" in pending["message"]

    # A node of it cannot be deleted: it cannot be reached. 503, saying why (not 409).
    core = k8s.CoreV1Api(management)
    if cluster_id not in {n.metadata.name for n in core.list_namespace().items}:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=cluster_id)))
    crs.create_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodes", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Node",
        "metadata": {"name": "m-e2ewait"}, "spec": {"requestedHostname": "waiting-node"},
    })  # fmt: skip
    node = f"/v3/clusters/{cluster_id}/nodes/m-e2ewait"
    wait_for("the node record in the cache", lambda: api.get(node).status == 200, 10)
    refused = api.delete(node)
    assert (refused.status, refused.body["code"]) == (503, "ClusterUnavailable"), refused.body
    assert "no credential" in refused.body["message"]
    crs.delete_namespaced_custom_object(GROUP, VERSION, cluster_id, "nodes", "m-e2ewait")

    # A kubeconfig that does not work leaves the cluster waiting.
    bad = api.put(f"/v3/clusters/{cluster_id}", {"importedConfig": {"kubeConfig": "%%%"}})
    assert (bad.status, bad.body["fieldName"]) == (422, "importedConfig.kubeConfig"), bad.body
    itself = api.put(
        f"/v3/clusters/{cluster_id}",
        {"importedConfig": {"kubeConfig": encoded(stack.management_kubeconfig)}},
    )
    assert (itself.status, itself.body["code"]) == (409, "AlreadyExists"), itself.body
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "pending"

    plane = add_downstream("awaited", nodes=1)
    kubeconfig = {"kubeConfig": encoded(plane.kubeconfig_path)}
    # The rest of the body is checked before anything is imported.
    for body, field in (({"importedConfig": kubeconfig, "agentEnvVars": "X=1"}, "agentEnvVars"),
                        ({"importedConfig": "text"}, "importedConfig")):  # fmt: skip
        refused = api.put(f"/v3/clusters/{cluster_id}", body)
        assert (refused.status, refused.body["fieldName"]) == (422, field), refused.body
    assert api.get(f"/v3/clusters/{cluster_id}").body["state"] == "pending"
    assert (
        not k8s.CoreV1Api(management)
        .list_namespaced_secret(
            "svc-system", label_selector=f"management.svc.io/cluster-credential={cluster_id}"
        )
        .items
    )
    imported = api.put(f"/v3/clusters/{cluster_id}",
                       {"importedConfig": {"kubeConfig": encoded(plane.kubeconfig_path)},
                        "description": "imported later"})  # fmt: skip
    assert imported.status == 200, imported.body
    assert (imported.body["id"], imported.body["description"]) == (cluster_id, "imported later")
    wait_for(
        "the cluster active",
        lambda: api.get(f"/v3/clusters/{cluster_id}").body["state"] == "active",
        60,
    )
    assert wait_for(
        "its node mirrored", lambda: api.get(f"/v3/clusters/{cluster_id}/nodes").body["data"], 30
    )
    again = api.put(
        f"/v3/clusters/{cluster_id}",
        {"importedConfig": {"kubeConfig": encoded(plane.kubeconfig_path)}},
    )
    assert (again.status, again.body["code"]) == (422, "InvalidAction")
    assert api.delete(f"/v3/clusters/{cluster_id}").status == 204


def test_agent_settings_are_kept_whole(api: Api, crs: k8s.CustomObjectsApi) -> None:
    env = [{"name": "PLAIN", "value": "1"},
           {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]  # fmt: skip
    agent = {"appendTolerations": [{"key": "dedicated", "operator": "Exists"}],
             "overrideResourceRequirements": {"limits": {"memory": "256Mi"}}}  # fmt: skip
    fleet = {"overrideAffinity": {"nodeAffinity": {}}}
    cluster = waiting_cluster(
        api, agentEnvVars=env, clusterAgentDeploymentCustomization=agent,
        fleetAgentDeploymentCustomization=fleet,
        defaultPodSecurityAdmissionConfigurationTemplateName="restricted",
    )  # fmt: skip
    expected = {"agentEnvVars": env, "clusterAgentDeploymentCustomization": agent,
                "fleetAgentDeploymentCustomization": fleet,
                "defaultPodSecurityAdmissionConfigurationTemplateName": "restricted"}  # fmt: skip
    stored = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster["id"])["spec"]
    for shown in (cluster, cluster["spec"], api.get(f"/v3/clusters/{cluster['id']}").body,
                  stored):  # fmt: skip
        assert {k: shown.get(k) for k in expected} == expected

    changed = api.put(f"/v3/clusters/{cluster['id']}", {
        "agentEnvVars": env[1:], "clusterAgentDeploymentCustomization": {},
        "defaultPodSecurityAdmissionConfigurationTemplateName": "baseline",
    })  # fmt: skip
    assert changed.status == 200, changed.body
    assert changed.body["agentEnvVars"] == env[1:]
    assert changed.body["clusterAgentDeploymentCustomization"] == {}
    assert changed.body["fleetAgentDeploymentCustomization"] == fleet
    assert changed.body["defaultPodSecurityAdmissionConfigurationTemplateName"] == "baseline"
    api.delete(f"/v3/clusters/{cluster['id']}")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agentEnvVars": [{"name": "X", "value": "1", "valueFrom": {"fieldRef": {}}}]},
         "agentEnvVars[0]"),
        ({"agentEnvVars": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s"}}}]},
         "agentEnvVars[0].valueFrom.secretKeyRef.key"),
        ({"agentEnvVars": [{"name": "X", "valueFrom": {"fieldRef": {}, "secretKeyRef": {}}}]},
         "agentEnvVars[0].valueFrom"),
        ({"agentEnvVars": "X=1"}, "agentEnvVars"),
        ({"clusterAgentDeploymentCustomization": ["x"]}, "clusterAgentDeploymentCustomization"),
        ({"fleetAgentDeploymentCustomization": {"x": "y" * 70_000}},
         "fleetAgentDeploymentCustomization"),
        ({"defaultPodSecurityAdmissionConfigurationTemplateName": "Not A Name"},
         "defaultPodSecurityAdmissionConfigurationTemplateName"),
    ],
)  # fmt: skip
def test_bad_agent_settings_are_422_and_store_nothing(
    api: Api, crs: k8s.CustomObjectsApi, body: dict[str, Any], field: str
) -> None:
    refused = api.post("/v3/clusters", {"type": "cluster", "name": "bad-agent", **body})
    assert (refused.status, refused.body.get("fieldName")) == (422, field), refused.body
    clusters = crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
    assert "bad-agent" not in {c["spec"]["displayName"] for c in clusters}


# -- deprecated -------------------------------------------------------------------------------


def test_the_deprecated_driver_is_marked_in_schemas_and_crd_and_never_made(
    api: Api, management: k8s.ApiClient
) -> None:
    driver = api.get("/v3/schemas/cluster").body["resourceFields"]["driver"]
    assert "svcKubernetesEngine" in driver["options"]
    assert "deprecated" in driver["deprecatedOptions"]["svcKubernetesEngine"]
    crd = k8s.ApiextensionsV1Api(management).read_custom_resource_definition(
        "clusters.management.svc.io"
    )
    marks = json.loads(crd.metadata.annotations["management.svc.io/deprecated"])
    assert "spec.driver=svcKubernetesEngine" in marks
    refused = api.post("/v3/clusters", {"name": "legacy", "driver": "svcKubernetesEngine"})
    assert (refused.status, refused.body["code"]) == (422, "InvalidOption")
    assert "deprecated" in refused.body["message"]
