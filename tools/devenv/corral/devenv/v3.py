"""The few /v3 calls the local environment makes as a client would: JSON in and out over the
environment's TLS, as the admin or anonymously."""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

TIMEOUT = 10.0


def post_json(
    url: str, body: dict[str, Any], context: ssl.SSLContext, token: str | None = None
) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:  # noqa: S310
        result: dict[str, Any] = json.loads(response.read())
        return result


def get_json(url: str, context: ssl.SSLContext, token: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:  # noqa: S310
        result: dict[str, Any] = json.loads(response.read())
        return result


def http_ok(url: str, context: ssl.SSLContext | None) -> bool:
    with urllib.request.urlopen(url, timeout=5, context=context) as response:  # noqa: S310
        return bool(response.status == 200)
