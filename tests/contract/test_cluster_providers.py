"""Clusters of hosted Kubernetes services (AKS, EKS, GKE): no provider for them is installed,
so a create that asks for one, however it asks, through `/v3` or `/v1`, is 422 `InvalidOption`
naming what asked, and nothing is stored that could never come."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import Person

GROUP, VERSION = names.GROUP, names.VERSION


def stored_clusters(crs: k8s.CustomObjectsApi) -> set[str]:
    items = crs.list_cluster_custom_object(GROUP, VERSION, "clusters")["items"]
    return {c["metadata"]["name"] for c in items}


@pytest.mark.parametrize(
    ("body", "field", "service"),
    [
        ({"aksConfig": {}}, "aksConfig", "AKS"),
        ({"eksConfig": {"region": "eu-west-1"}}, "eksConfig", "EKS"),
        ({"gkeConfig": {}}, "gkeConfig", "GKE"),
        ({"eksConfig": {}, "driver": "EKS"}, "eksConfig", "EKS"),
        ({"driver": "AKS"}, "driver", "AKS"),
        ({"driver": "eks"}, "driver", "EKS"),
        ({"driver": "Gke"}, "driver", "GKE"),
    ],
)
async def test_a_v3_create_of_a_hosted_service_is_refused_and_stores_nothing(
    admin: Person, crs: k8s.CustomObjectsApi, body: dict[str, Any], field: str, service: str
) -> None:
    before = stored_clusters(crs)
    answer = await admin.api.post("/v3/clusters", {"type": "cluster", "name": "cloud", **body})
    error(answer, 422, "InvalidOption", field)
    assert f"no provider for {service} clusters is installed" in answer.body["message"]
    assert stored_clusters(crs) == before


@pytest.mark.parametrize("config", ["aksConfig", "eksConfig", "gkeConfig"])
async def test_a_v1_create_of_a_hosted_service_is_refused_and_stores_nothing(
    admin: Person, crs: k8s.CustomObjectsApi, config: str
) -> None:
    before = stored_clusters(crs)
    body = {"metadata": {"name": "cloud", "namespace": "team-a"}, "spec": {config: {}}}
    answer = await admin.api.post("/v1/provisioning.svc.io.clusters", body)
    error(answer, 422, "InvalidOption", f"spec.{config}")
    assert "no provider for" in answer.body["message"]
    assert stored_clusters(crs) == before
