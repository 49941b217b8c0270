"""`/` and `/static/<file>`: the web console as `make console` built it, served to anyone with
its cache headers and a Content-Security-Policy that lets no inline script run."""

from __future__ import annotations

import gzip
import re
from html.parser import HTMLParser
from typing import Any

from aiohttp.test_utils import TestClient

from corral.apiserver.routes import console

from .test_assets import raw_get


class Page(HTMLParser):
    """The scripts and the URLs an HTML page names."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.urls: list[str] = []
        self._in_script = False
        self.inline: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script":
            self.scripts.append(named)
            self._in_script = True
        for key in ("src", "href"):
            if (value := named.get(key)) is not None:
                self.urls.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)


async def page(client: TestClient[Any, Any]) -> tuple[dict[str, str], Page]:
    async with client.get("/") as answer:
        assert answer.status == 200
        parsed = Page()
        parsed.feed(await answer.text())
        return dict(answer.headers), parsed


async def test_the_page_is_public_revalidated_and_runs_no_inline_script(
    client: TestClient[Any, Any],
) -> None:
    headers, parsed = await page(client)
    assert headers["Content-Type"].startswith("text/html")
    assert headers["Cache-Control"] == "no-cache"
    policy = headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert "frame-ancestors 'none'" in policy
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert parsed.scripts and all(s.get("src") for s in parsed.scripts)
    assert parsed.inline == []
    # Everything it names is corral's own: no other host, no data: URL.
    assert parsed.urls and all(re.fullmatch(r"/static/[A-Za-z0-9._-]+", u) for u in parsed.urls)


async def test_its_files_are_public_cached_for_good_and_compressed_on_request(
    client: TestClient[Any, Any],
) -> None:
    _, parsed = await page(client)
    for url in parsed.urls:
        async with client.get(url, headers={"Accept-Encoding": "identity"}) as plain:
            assert plain.status == 200, url
            assert plain.headers["Cache-Control"] == "public, max-age=31536000, immutable"
            assert "Content-Security-Policy" in plain.headers
            body = await plain.read()
        async with client.get(url, headers={"Accept-Encoding": "br"}, auto_decompress=False) as br:
            assert br.status == 200
            assert br.headers["Content-Encoding"] == "br"
            assert len(await br.read()) < len(body)


async def test_a_compressed_copy_is_the_file_itself(client: TestClient[Any, Any]) -> None:
    """Every file of the build, the chunks the page imports later included, decompresses to
    what is sent uncompressed: a copy taken before the build's last rewrite would run other
    code in the browsers that take it (all of them, over HTTPS)."""
    files = sorted(p.name for p in (console.BUILT / console.STATIC).glob("*.gz"))
    assert any(name.endswith(".js.gz") for name in files), files
    for name in files:
        url = f"/static/{name.removesuffix('.gz')}"
        async with client.get(url, headers={"Accept-Encoding": "identity"}) as plain:
            body = await plain.read()
        asked = {"Accept-Encoding": "gzip"}
        async with client.get(url, headers=asked, auto_decompress=False) as gz:
            assert gz.headers["Content-Encoding"] == "gzip", url
            assert gzip.decompress(await gz.read()) == body, url


async def test_a_name_not_of_the_build_is_404(client: TestClient[Any, Any]) -> None:
    async with client.get("/static/missing-0000.js") as answer:
        assert answer.status == 404
        assert (await answer.json())["code"] == "NotFound"
    for target in ("/static/..%2Fapp.py", "/static/.hidden", "/static/%2e%2e"):
        status, _ = await raw_get(client, target)
        assert status == 404, target


async def test_the_api_still_needs_a_credential_beside_it(client: TestClient[Any, Any]) -> None:
    async with client.get("/v3/clusters", headers={"Accept": "application/json"}) as answer:
        assert answer.status == 401
        body = await answer.json()
    assert body["code"] == "Unauthorized"
