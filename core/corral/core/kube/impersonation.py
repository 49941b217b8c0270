"""Acting downstream as a user: what corral writes in a cluster because a user asked
(workloads, their pods' logs and commands, secrets) goes with corral's credential and the
user's identity in `Impersonate-User`/`Impersonate-Group`, so the cluster's RBAC, quotas,
limit ranges and admission (Pod Security among them) judge the user, not corral.

A user's grant reaches a cluster as a RoleBinding that the project sync writes a moment after
the grant (or after a namespace is made): a request refused by RBAC alone is sent again while
that binding may still be on its way (`GRANT_WAIT`), never one refused for any other reason.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx2

IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
# How long a write refused by RBAC is tried again: the project sync writes a new grant's
# RoleBindings within a pass (well under a second at rest).
GRANT_WAIT = 15.0
_RETRY_FIRST = 0.1
_RETRY_MAX = 1.0
# kube-apiserver's words for an RBAC refusal (`User "u" cannot create resource "pods" …`);
# a quota's, a limit range's or Pod Security's refusal is a 403 too, but says otherwise.
_RBAC_REFUSAL = re.compile(r'(User|ServiceAccount|Group) "[^"]*" cannot [a-z]+ ')


@dataclass(frozen=True)
class Impersonation:
    """Who a request downstream is made as."""

    user: str
    groups: tuple[str, ...] = ()

    def headers(self) -> list[tuple[str, str]]:
        return [(IMPERSONATE_USER, self.user), *((IMPERSONATE_GROUP, g) for g in self.groups)]


class ImpersonatingTransport(httpx2.AsyncBaseTransport):
    """Sends every request of one typed client as `who`, over the cluster's shared transport
    (one TLS context and connection pool for all the users acting in a cluster); a request
    that RBAC alone refuses is sent again while the user's grant may be on its way."""

    def __init__(
        self,
        shared: httpx2.AsyncBaseTransport,
        who: Impersonation,
        wait: float = GRANT_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._shared = shared
        self._who = who
        self._wait = wait
        self._clock = clock

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        kept = [
            (k, v)
            for k, v in request.headers.multi_items()
            if not k.lower().startswith("impersonate-")
        ]
        request.headers = httpx2.Headers([*kept, *self._who.headers()])
        deadline = self._clock() + self._wait
        delay = _RETRY_FIRST
        while True:
            response = await self._shared.handle_async_request(request)
            if response.status_code != 403:
                return response
            body = await response.aread()
            await response.aclose()
            if not refused_by_rbac(body) or self._clock() + delay > deadline:
                return httpx2.Response(403, headers=response.headers, content=body)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    async def aclose(self) -> None:
        """The shared transport is the connection's to close, not one user's client's."""


def refused_by_rbac(body: bytes) -> bool:
    """Whether a 403's Status says that RBAC refused the request."""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return False
    return isinstance(message, str) and _RBAC_REFUSAL.search(message) is not None
