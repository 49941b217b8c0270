"""corral's operator and API server run against the management cluster as `make run` runs them."""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.devenv.environment import Environment


def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return response.status, json.loads(response.read())


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_apiserver_health_endpoints_answer_over_https(
    stack: Environment, corral_tls: ssl.SSLContext, path: str
) -> None:
    assert stack.api_url.startswith("https://")
    status, body = get(stack.api_url + path, corral_tls)
    assert (status, body["status"]) == (200, "ok")


def test_apiserver_refuses_plain_http(stack: Environment) -> None:
    with pytest.raises(OSError):
        get(stack.api_url.replace("https://", "http://") + "/healthz")


def test_v3_root_names_the_api_version(stack: Environment, corral_tls: ssl.SSLContext) -> None:
    status, body = get(stack.api_url + "/v3", corral_tls)
    assert status == 200
    assert body["type"] == "apiRoot"
    assert body["apiVersion"] == {"group": "management.svc.io", "path": "/v3", "version": "v3"}
    assert body["links"]["self"] == stack.api_url + "/v3"


def test_operator_is_live_and_holds_the_peering_object(
    stack: Environment, management: k8s.ApiClient
) -> None:
    status, body = get(stack.operator_liveness)
    assert status == 200
    assert "now" in body
    peering = k8s.CustomObjectsApi(management).get_cluster_custom_object(
        "kopf.dev", "v1", "clusterkopfpeerings", "corral"
    )
    # kopf writes each live operator's identity into the peering object's status.
    assert peering.get("status"), "no operator has announced itself in the peering object"
