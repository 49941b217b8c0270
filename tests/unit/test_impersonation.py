"""Acting as a user downstream: the user's headers on every request (never the caller's own
attempts), and a request refused by RBAC alone sent again while the grant may be on its way."""

from __future__ import annotations

import json

import httpx2
import pytest

from corral.core.kube.impersonation import ImpersonatingTransport, Impersonation

ALICE = Impersonation("u-alice", ("system:authenticated", "oidc_group://devs"))
RBAC = {"message": 'deployments.apps is forbidden: User "u-alice" cannot create resource '
        '"deployments" in API group "apps" in the namespace "web"'}  # fmt: skip
PSA = {"message": 'pods "x" is forbidden: violates PodSecurity "baseline:latest": hostPath'}


class Shared(httpx2.AsyncBaseTransport):
    """The cluster: answers each request with the next of `answers`, and records what came."""

    def __init__(self, *answers: tuple[int, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.seen: list[httpx2.Request] = []
        self.closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        status, body = self.answers.pop(0)
        return httpx2.Response(status, content=json.dumps(body).encode())

    async def aclose(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def request() -> httpx2.Request:
    return httpx2.Request(
        "POST",
        "https://cluster/apis/apps/v1/namespaces/web/deployments",
        headers=[("Impersonate-User", "system:admin"), ("Impersonate-Group", "system:masters")],
        content=b"{}",
    )


async def test_every_request_goes_as_the_user_and_nobody_else() -> None:
    shared = Shared((201, {}))
    response = await ImpersonatingTransport(shared, ALICE).handle_async_request(request())
    assert response.status_code == 201
    sent = shared.seen[0].headers
    assert sent.get_list("Impersonate-User") == ["u-alice"]
    assert sent.get_list("Impersonate-Group") == ["system:authenticated", "oidc_group://devs"]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A clock that sleeping moves on, without waiting."""
    fake = Clock()

    async def sleep(delay: float) -> None:
        fake.now += delay

    monkeypatch.setattr("asyncio.sleep", sleep)
    return fake


async def test_a_refusal_by_rbac_is_tried_again_until_the_grant_lands(clock: Clock) -> None:
    shared = Shared((403, RBAC), (403, RBAC), (201, {"kind": "Deployment"}))
    transport = ImpersonatingTransport(shared, ALICE, wait=15, clock=clock)
    response = await transport.handle_async_request(request())
    assert response.status_code == 201
    assert len(shared.seen) == 3


async def test_a_refusal_by_rbac_stands_once_the_wait_is_over(clock: Clock) -> None:
    shared = Shared(*[(403, RBAC)] * 100)
    transport = ImpersonatingTransport(shared, ALICE, wait=3, clock=clock)
    response = await transport.handle_async_request(request())
    assert response.status_code == 403
    assert json.loads(response.content) == RBAC
    assert clock.now <= 3
    assert 3 <= len(shared.seen) < 100


async def test_any_other_refusal_is_answered_at_once() -> None:
    shared = Shared((403, PSA))
    response = await ImpersonatingTransport(shared, ALICE).handle_async_request(request())
    assert response.status_code == 403
    assert json.loads(response.content) == PSA
    assert len(shared.seen) == 1


async def test_closing_one_users_client_leaves_the_shared_transport_open() -> None:
    shared = Shared()
    await ImpersonatingTransport(shared, ALICE).aclose()
    assert not shared.closed
