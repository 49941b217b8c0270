"""A minimal /v3 client over aiohttp's test client: what any HTTP client would send, with a
token of the caller's, and nothing of corral's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp.test_utils import TestClient

T = TypeVar("T")


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Api:
    client: TestClient[Any, Any]
    token: str | None = None

    async def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> Response:
        sent = {"Accept": "application/json", **(headers or {})}
        if self.token and "Authorization" not in sent:
            sent["Authorization"] = f"Bearer {self.token}"
        async with self.client.request(method, path, json=body, headers=sent) as answer:
            raw = await answer.read()
            text = raw.decode()
            parsed = await answer.json(content_type=None) if text.strip() else None
            return Response(answer.status, dict(answer.headers), parsed)

    async def get(self, path: str, **kwargs: Any) -> Response:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return await self.request("POST", path, body, **kwargs)

    async def put(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return await self.request("PUT", path, body, **kwargs)

    async def delete(self, path: str, **kwargs: Any) -> Response:
        return await self.request("DELETE", path, **kwargs)

    def as_token(self, token: str | None) -> Api:
        return Api(self.client, token)


async def eventually(
    what: str, probe: Callable[[], Awaitable[T | None]], within: float = 10.0
) -> T:
    """Await `probe` until it returns something truthy (what the app's watch caches see comes
    a moment after a direct write), and return that."""
    try:
        async with asyncio.timeout(within):
            while True:
                if result := await probe():
                    return result
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise TimeoutError(f"timed out after {within:.0f}s waiting for {what}") from None


def error(response: Response, status: int, code: str, field: str | None = None) -> None:
    """The one error body: its status, code and, when one field is at fault, that field."""
    assert response.status == status, response.body
    body = response.body
    assert body["type"] == "error" and body["status"] == status, body
    assert body["code"] == code, body
    assert body["message"], body
    if field is None:
        assert "fieldName" not in body, body
    else:
        assert body["fieldName"] == field, body
