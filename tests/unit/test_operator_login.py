"""The operator reaches the API server in-cluster by the address the kubelet gives, not DNS."""

from __future__ import annotations

import pytest

from corral.operator.startup import in_cluster_server

DNS_NAME = "https://kubernetes.default.svc"


def test_the_service_address_from_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    assert in_cluster_server(DNS_NAME) == "https://10.0.0.1:6443"


def test_an_ipv6_service_address_is_bracketed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    assert in_cluster_server(DNS_NAME) == "https://[fd00::1]:443"


def test_without_the_variables_kopfs_name_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert in_cluster_server(DNS_NAME) == DNS_NAME
