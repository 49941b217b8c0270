"""The local control plane is real: CRDs establish, controllers reconcile, kwok runs pods."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from corral.devenv.waiting import wait_for

from ..conftest import ROOT


def crd_names_in_repo() -> set[str]:
    names = set()
    for path in (ROOT / "crds").glob("*.yaml"):
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if doc and doc["kind"] == "CustomResourceDefinition":
                names.add(doc["metadata"]["name"])
    return names


def test_every_crd_in_the_repository_is_established(management: k8s.ApiClient) -> None:
    expected = crd_names_in_repo()
    assert expected, "crds/ holds no CustomResourceDefinition"
    established = {
        crd.metadata.name
        for crd in k8s.ApiextensionsV1Api(management).list_custom_resource_definition().items
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    }
    assert expected <= established


def test_downstream_runs_a_deployment_on_kwok_nodes_and_deletes_its_namespace(
    downstream: k8s.ApiClient,
) -> None:
    core, apps = k8s.CoreV1Api(downstream), k8s.AppsV1Api(downstream)
    namespace = "e2e-deploy"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    labels = {"app": "web"}
    apps.create_namespaced_deployment(
        namespace,
        k8s.V1Deployment(
            metadata=k8s.V1ObjectMeta(name="web"),
            spec=k8s.V1DeploymentSpec(
                replicas=3,
                selector=k8s.V1LabelSelector(match_labels=labels),
                template=k8s.V1PodTemplateSpec(
                    metadata=k8s.V1ObjectMeta(labels=labels),
                    spec=k8s.V1PodSpec(
                        containers=[k8s.V1Container(name="web", image="nginx:1.27")]
                    ),
                ),
            ),
        ),
    )
    fake_nodes = {
        n.metadata.name
        for n in core.list_node().items
        if n.metadata.annotations.get("kwok.x-k8s.io/node") == "fake"
    }

    def running_pods() -> list[k8s.V1Pod] | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        running = [p for p in pods if p.status.phase == "Running"]
        return running if len(running) == 3 else None

    pods = wait_for("3 running pods", running_pods, timeout=90)
    assert {p.spec.node_name for p in pods} <= fake_nodes

    core.delete_namespace(namespace)

    def namespace_gone() -> bool:
        try:
            core.read_namespace(namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for("namespace deletion", namespace_gone, timeout=90)
