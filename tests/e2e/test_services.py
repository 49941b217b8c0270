"""corral's operator and API server run against the management cluster as `make run` runs them."""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment

from .api import Api


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


def test_v3_root_names_the_api_version_and_its_collections(stack: Environment, api: Api) -> None:
    response = api.get("/v3")
    assert response.status == 200
    assert response.body["type"] == "apiRoot"
    assert response.body["apiVersion"] == {
        "group": "management.svc.io", "path": "/v3", "version": "v3",
    }  # fmt: skip
    assert response.body["links"]["self"] == stack.api_url + "/v3"
    assert response.body["links"]["tokens"] == stack.api_url + "/v3/tokens"
    assert response.headers["X-Api-Schemas"] == stack.api_url + "/v3/schemas"


def test_v3_needs_authentication(api: Api) -> None:
    response = api.as_token(None).get("/v3")
    assert (response.status, response.body["message"]) == (401, "must authenticate")


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
