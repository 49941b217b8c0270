"""`GET /assets/<file>`: the files real machines download, from CORRAL_NODE_ASSET_DIR alone."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from .client import Api, error
from .conftest import Serving, make_app

# Larger than one read of FileResponse's (256 KiB), so it is streamed in pieces.
CONTENT = os.urandom(700 * 1024)
SECRET = b"outside the asset directory"


@pytest.fixture(scope="module")
def asset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An asset directory with one file, and around it what must never be served: a file
    beside the directory, a sub-directory's file, a hidden file and symlinks out."""
    root = tmp_path_factory.mktemp("assets")
    (root / "secret").write_bytes(SECRET)
    served = root / "served"
    served.mkdir()
    (served / "kubelet-v1.36.3").write_bytes(CONTENT)
    (served / "bin").mkdir()
    (served / "bin" / "kubelet").write_bytes(SECRET)
    (served / ".hidden").write_bytes(SECRET)
    (served / "link").symlink_to(root / "secret")
    (served / "dir-link").symlink_to(root)
    return served


@pytest.fixture(scope="module")
async def server(
    kubeconfig: Path, asset_dir: Path, serving: Serving
) -> AsyncIterator[TestClient[Any, Any]]:
    """The application as `corral-apiserver` builds it with CORRAL_NODE_ASSET_DIR set."""
    app = make_app(serving, node_assets=asset_dir)
    async with TestClient(TestServer(app)) as served:
        yield served


async def raw_get(server: TestClient[Any, Any], target: str) -> tuple[int, bytes]:
    """GET `target` exactly as written on the request line, as a hostile client sends it: an
    HTTP client library would normalise `..` and percent-escapes first."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_a_file_is_served_to_anyone_as_it_is_on_disk(server: TestClient[Any, Any]) -> None:
    async with server.get("/assets/kubelet-v1.36.3") as answer:
        assert answer.status == 200
        assert answer.headers["Content-Length"] == str(len(CONTENT))
        got = await answer.read()
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(CONTENT).hexdigest()


async def test_head_and_ranges_answer_as_for_any_download(server: TestClient[Any, Any]) -> None:
    async with server.head("/assets/kubelet-v1.36.3") as answer:
        assert answer.status == 200
        assert answer.headers["Content-Length"] == str(len(CONTENT))
        assert await answer.read() == b""
    async with server.get("/assets/kubelet-v1.36.3", headers={"Range": "bytes=10-19"}) as answer:
        assert answer.status == 206
        assert await answer.read() == CONTENT[10:20]


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_nothing_but_get_and_head(server: TestClient[Any, Any], method: str) -> None:
    answer = await Api(server).request(method, "/assets/kubelet-v1.36.3")
    assert answer.status == 405
    assert answer.body["code"] == "MethodNotAllowed"


@pytest.mark.parametrize(
    "target",
    [
        "/assets/missing",
        "/assets/",
        "/assets/../secret",
        "/assets/..%2fsecret",
        "/assets/%2e%2e%2fsecret",
        "/assets/%2E%2E/secret",
        "/assets/served/../../secret",
        "/assets/bin/kubelet",
        "/assets/bin%2fkubelet",
        "/assets/bin",
        "/assets/.hidden",
        "/assets/link",
        "/assets/dir-link%2fsecret",
        "/assets//etc/passwd",
        "/assets/%2fetc%2fpasswd",
        "/assets/kubelet-v1.36.3%00",
        "/assets/..",
        "/assets/.",
    ],
)
async def test_only_regular_files_directly_in_the_directory(
    server: TestClient[Any, Any], target: str
) -> None:
    status, body = await raw_get(server, target)
    assert status == 404, (target, status)
    assert SECRET not in body and b"root:" not in body


async def test_a_missing_file_is_the_api_s_404(server: TestClient[Any, Any]) -> None:
    answer = await Api(server).get("/assets/kube-proxy-v1.36.3")
    error(answer, 404, "NotFound")
    assert "kube-proxy-v1.36.3" in answer.body["message"]


async def test_without_an_asset_directory_nothing_is_served(anonymous: Api) -> None:
    answer = await anonymous.get("/assets/kubelet-v1.36.3")
    error(answer, 404, "NotFound")
