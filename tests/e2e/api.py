"""A minimal /v3 client for the tests: what any HTTP client would send, nothing of corral's."""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: Any
    cookies: dict[str, Any] = field(default_factory=dict)


@dataclass
class Api:
    base: str
    context: ssl.SSLContext
    token: str | None = None
    basic: bool = False

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
        auth: bool = True,
    ) -> Response:
        all_headers = {"Accept": "application/json", **(headers or {})}
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            all_headers["Content-Type"] = "application/json"
        if auth and self.token and "Authorization" not in all_headers:
            if self.basic:
                encoded = base64.b64encode(self.token.encode()).decode()
                all_headers["Authorization"] = f"Basic {encoded}"
            else:
                all_headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base + path, data, all_headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as response:
                return _response(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            return _response(error.code, error.headers, error.read())

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return self.request("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Response:
        return self.request("PUT", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Response:
        return self.request("DELETE", path, **kwargs)

    def as_token(self, token: str | None, basic: bool = False) -> Api:
        return Api(self.base, self.context, token, basic)

    def login(self, username: str, password: str, **extra: Any) -> Response:
        return self.post(
            "/v3-public/localProviders/local?action=login",
            {"username": username, "password": password, **extra},
            auth=False,
        )


def handshake(api: Api, path: str, **headers: str) -> tuple[int, bytes]:
    """A WebSocket handshake as a browser or kubectl sends it, with `headers` (credentials,
    Origin, subprotocols); the status, and the body of a refusal."""
    host, port = api.base.removeprefix("https://").rsplit(":", 1)
    connection = http.client.HTTPSConnection(host, int(port), context=api.context, timeout=30)
    try:
        connection.putrequest("GET", path)
        for name, value in {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": base64.b64encode(secrets.token_bytes(16)).decode(),
            "Sec-WebSocket-Version": "13",
            **headers,
        }.items():
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read() if answer.status != 101 else b""
    finally:
        connection.close()


def _response(status: int, headers: Any, raw: bytes) -> Response:
    cookies: SimpleCookie = SimpleCookie()
    for value in headers.get_all("Set-Cookie") or []:
        cookies.load(value)
    if not raw.strip():
        body = None
    elif (headers.get("Content-Type") or "").startswith("text/plain"):
        body = raw.decode()  # a pod's log
    else:
        body = json.loads(raw)
    return Response(status, dict(headers.items()), body, dict(cookies.items()))
