"""Waiting for a new RBAC grant to take effect: the authorizer's cache sees a new role or
binding a moment after the write, and a request made before that is refused. There is nothing
to watch for it, so an access review is asked again, less often as time goes on."""

from __future__ import annotations

import asyncio

from lightkube import AsyncClient
from lightkube.resources.authorization_v1 import SelfSubjectAccessReview, SubjectAccessReview

from corral.core.errors import Unavailable

# It is at once on an idle apiserver (3 ms measured); the bound is for a loaded one.
WAIT = 30.0
POLL_FIRST = 0.05
POLL_MAX = 1.0


async def until_allowed(
    client: AsyncClient,
    review: SubjectAccessReview | SelfSubjectAccessReview,
    what: str,
    wait: float = WAIT,
) -> None:
    """Until `review` is allowed; Unavailable naming `what` after `wait` seconds."""
    pause = POLL_FIRST
    try:
        async with asyncio.timeout(wait):
            while True:
                answer = await client.create(review)
                if answer.status is not None and answer.status.allowed:
                    return
                await asyncio.sleep(pause)
                pause = min(pause * 2, POLL_MAX)
    except TimeoutError:
        raise Unavailable(f"{what} is not in effect after {wait:g}s") from None
