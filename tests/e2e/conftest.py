"""The real stack, started once per test session the way `make run` starts it.

Tests check what lands in the clusters with the official `kubernetes` client, independently of
corral's own client code.
"""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.devenv.environment import Environment, Options

ROOT = Path(__file__).resolve().parents[2]
DEVKUBE = ROOT / "tools" / "devkube" / "bin" / "devkube"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def devkube() -> Path:
    # A no-op when the cached binary matches the sources; builds it otherwise.
    subprocess.run([str(ROOT / "tools" / "devkube" / "build.sh")], check=True)
    return DEVKUBE


def stack_options(root: Path, devkube: Path, **overrides: object) -> Options:
    settings: dict[str, object] = {
        "root": root,
        "devkube": devkube,
        "crds": ROOT / "crds",
        "downstream_clusters": 1,
        "nodes_per_cluster": 3,
        "api_port": 0,
    }
    settings.update(overrides)
    return Options(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    with Environment(stack_options(tmp_path_factory.mktemp("corral"), devkube)) as env:
        yield env


@pytest.fixture(scope="session")
def management(stack: Environment) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(stack.management_kubeconfig))


@pytest.fixture(scope="session")
def downstream(stack: Environment) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(stack.downstream_kubeconfigs()[0]))


@pytest.fixture(scope="session")
def corral_tls(stack: Environment) -> ssl.SSLContext:
    """Trusts the CA of corral's serving certificate, as CORRAL_CA tells a client to."""
    return ssl.create_default_context(cafile=str(stack.ca_path))
