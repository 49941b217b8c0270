from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from corral.apiserver.app import ROUTE_MODULES, SCHEMA_LIST
from corral.apiserver.config import ApiServerConfig, ConfigError
from corral.apiserver.http import urls
from corral.apiserver.http.schemas import Registry
from corral.apiserver.readiness import Readiness
from corral.apiserver.routes import health, root
from tests.unit.held import holding


def test_config_requires_a_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORRAL_TLS_CERT_FILE", raising=False)
    monkeypatch.delenv("CORRAL_TLS_KEY_FILE", raising=False)
    with pytest.raises(ConfigError, match="required"):
        ApiServerConfig.from_env()


def test_config_reads_listen_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRAL_LISTEN", "127.0.0.1:9443")
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", "/c.crt")
    monkeypatch.setenv("CORRAL_TLS_KEY_FILE", "/c.key")
    config = ApiServerConfig.from_env()
    assert (config.host, config.port, config.tls_cert) == ("127.0.0.1", 9443, Path("/c.crt"))


def test_config_rejects_a_listen_address_without_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRAL_LISTEN", "127.0.0.1")
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", "/c.crt")
    monkeypatch.setenv("CORRAL_TLS_KEY_FILE", "/c.key")
    with pytest.raises(ConfigError, match="host:port"):
        ApiServerConfig.from_env()


@pytest.mark.parametrize(
    ("listen", "given", "expected"),
    [
        ("0.0.0.0:8443", None, "https://localhost:8443"),
        ("127.0.0.1:9443", None, "https://127.0.0.1:9443"),
        ("0.0.0.0:8443", "https://corral.example.com/", "https://corral.example.com"),
        ("0.0.0.0:8443", "https://corral.example.com:444", "https://corral.example.com:444"),
    ],
)
def test_config_external_url(
    monkeypatch: pytest.MonkeyPatch, listen: str, given: str | None, expected: str
) -> None:
    monkeypatch.setenv("CORRAL_LISTEN", listen)
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", "/c.crt")
    monkeypatch.setenv("CORRAL_TLS_KEY_FILE", "/c.key")
    if given is None:
        monkeypatch.delenv("CORRAL_EXTERNAL_URL", raising=False)
    else:
        monkeypatch.setenv("CORRAL_EXTERNAL_URL", given)
    assert ApiServerConfig.from_env().external_url == expected


@pytest.mark.parametrize(
    "given", ["corral.example.com", "ftp://x", "https://x/prefix", "https://x/?a=b", "https://"]
)
def test_config_refuses_an_external_url_that_is_not_an_origin(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("CORRAL_LISTEN", "0.0.0.0:8443")
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", "/c.crt")
    monkeypatch.setenv("CORRAL_TLS_KEY_FILE", "/c.key")
    monkeypatch.setenv("CORRAL_EXTERNAL_URL", given)
    with pytest.raises(ConfigError, match="CORRAL_EXTERNAL_URL"):
        ApiServerConfig.from_env()


@pytest.mark.parametrize(("given", "expected"), [(None, None), ("", None), ("/srv/a", "/srv/a")])
def test_config_node_asset_dir(
    monkeypatch: pytest.MonkeyPatch, given: str | None, expected: str | None
) -> None:
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", "/c.crt")
    monkeypatch.setenv("CORRAL_TLS_KEY_FILE", "/c.key")
    if given is None:
        monkeypatch.delenv("CORRAL_NODE_ASSET_DIR", raising=False)
    else:
        monkeypatch.setenv("CORRAL_NODE_ASSET_DIR", given)
    assets = ApiServerConfig.from_env().node_assets
    assert assets == (None if expected is None else Path(expected))


def test_config_refuses_a_relative_node_asset_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", "/c.crt")
    monkeypatch.setenv("CORRAL_TLS_KEY_FILE", "/c.key")
    monkeypatch.setenv("CORRAL_NODE_ASSET_DIR", "assets")
    with pytest.raises(ConfigError, match="CORRAL_NODE_ASSET_DIR must be an absolute path"):
        ApiServerConfig.from_env()


def test_readiness_waits_for_every_gate() -> None:
    readiness = Readiness()
    readiness.gate("b")
    readiness.gate("a")
    assert (readiness.ready, readiness.pending) == (False, ["a", "b"])
    readiness.open("a")
    readiness.open("b")
    assert readiness.ready


async def test_readyz_reports_pending_gates_until_they_open() -> None:
    readiness = Readiness()
    readiness.gate("management-cluster")
    app = holding(web.Application(), readiness=readiness, schemas=Registry(),
                  external_url="https://corral.example.com")  # fmt: skip
    app.add_routes(health.routes)
    app.add_routes(root.routes)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/readyz")
        assert response.status == 503
        assert (await response.json())["pending"] == ["management-cluster"]
        assert (await client.get("/healthz")).status == 200

        readiness.open("management-cluster")
        assert (await client.get("/readyz")).status == 200
        body = await (await client.get("/v3", headers={"Host": "evil.example.net"})).json()
        assert body["links"]["self"] == "https://corral.example.com/v3"


async def test_every_collection_the_root_links_to_is_routed() -> None:
    """Types that live under another (nodes, namespaces, events) must not be linked as if
    `/v3/<plural>` existed."""
    app = web.Application()
    urls.add_routes(app.router, (module.routes for module in ROUTE_MODULES))
    registry = Registry()
    registry.add(*SCHEMA_LIST)
    for schema in registry.collections():
        path = f"/v3/{schema.plural.lower()}"
        match = await app.router.resolve(make_mocked_request("GET", path, app=app))
        assert match.http_exception is None, f"/v3 links {path}, which no route serves"
    assert {"node", "namespace", "event"} <= {s.id for s in registry.all() if s.parent}
