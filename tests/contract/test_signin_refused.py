"""A provider sign-in that does not complete: a browser whose sign-in the console began
(`returnTo`) is sent back to the console's sign-in page with a fixed word for why; any other
client gets the error body it always got.

No provider is reachable in this tier, so the state cookie is sealed here under the key the API
server reads from the management cluster, as its login route seals it; the refusals before
the provider is asked (the state, the provider's `error`, a provider not enabled) are the
API server's own. The whole flow against Keycloak is tests/e2e/test_console_oidc.py's.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from cryptography.fernet import Fernet
from lightkube import AsyncClient

from corral.apiserver.auth.authn import SESSION_COOKIE
from corral.core.auth import loginstate
from corral.core.auth.loginstate import LoginState
from corral.core.kube import oidc_secrets

from .client import Api

OIDC = "/v3-public/oidcProviders/oidc"
COOKIE = "R_OIDC_STATE"
RETURN_TO = "/#/clusters/c-abcde"
STATE = "the-state"


async def _get(client: TestClient[Any, Any], path: str, sealed: str = "") -> tuple[int, str, Any]:
    """Status, Location and JSON body (None for a redirect) of a GET not followed, with the
    state cookie when given."""
    headers = {"Accept": "application/json", **({"Cookie": f"{COOKIE}={sealed}"} if sealed else {})}
    async with client.get(path, headers=headers, allow_redirects=False) as answer:
        location = answer.headers.get("Location", "")
        body = None if location else await answer.json(content_type=None)
        # Never a session, whatever the answer.
        assert not any(
            c.startswith(SESSION_COOKIE) for c in answer.headers.getall("Set-Cookie", [])
        )
        return answer.status, location, body


async def _sealed(kube: AsyncClient, return_to: str, age: int = 0) -> str:
    """A state cookie as the login route seals it, `age` seconds ago."""
    login = LoginState(STATE, "the-nonce", "v" * 48, "cookie", return_to)
    key = await oidc_secrets.state_key(kube)
    payload = json.dumps(asdict(login)).encode()
    return Fernet(key).encrypt_at_time(payload, int(time.time()) - age).decode()


async def test_a_console_login_of_a_provider_not_enabled_returns_to_the_sign_in_page(
    anonymous: Api,
) -> None:
    status, location, _ = await _get(
        anonymous.client, f"{OIDC}/login?returnTo=%2F%23%2Fclusters%2Fc-abcde"
    )
    assert (status, location) == (303, "/?signInError=disabled#/clusters/c-abcde")
    # An API client's login: the error body, as before.
    status, location, body = await _get(anonymous.client, f"{OIDC}/login")
    assert (status, location, body["code"]) == (404, "", "NotFound"), body


@pytest.mark.parametrize(
    ("query", "age", "reason"),
    [
        ("state=tampered&code=c", 0, "state"),
        ("code=c", 0, "state"),
        (f"state={STATE}&code=c", loginstate.MAX_AGE_SECONDS + 60, "state"),
        (f"state={STATE}&error=access_denied", 0, "cancelled"),
        (f"state={STATE}&error=server_error&error_description=%3Cscript%3E", 0, "provider"),
        (f"state={STATE}", 0, "provider"),
        # The state holds and a code came, but the provider is not enabled (disabled since).
        (f"state={STATE}&code=c", 0, "disabled"),
    ],
)  # fmt: skip
async def test_a_refused_callback_of_a_console_sign_in_returns_to_the_sign_in_page(
    anonymous: Api, kube: AsyncClient, query: str, age: int, reason: str
) -> None:
    sealed = await _sealed(kube, RETURN_TO, age)
    status, location, _ = await _get(anonymous.client, f"{OIDC}/callback?{query}", sealed)
    # Only the fixed word: nothing the provider sent is in the address.
    assert (status, location) == (303, f"/?signInError={reason}#/clusters/c-abcde")


async def test_a_refused_callback_of_an_api_clients_sign_in_keeps_the_error_body(
    anonymous: Api, kube: AsyncClient
) -> None:
    query = f"state={STATE}&error=access_denied"
    for sealed in (await _sealed(kube, ""), ""):  # begun without returnTo; no cookie at all
        status, location, body = await _get(anonymous.client, f"{OIDC}/callback?{query}", sealed)
        assert (status, location, body["code"]) == (401, "", "Unauthorized"), body


async def test_a_return_path_with_no_console_page_lands_on_the_bare_sign_in_page(
    anonymous: Api, kube: AsyncClient
) -> None:
    sealed = await _sealed(kube, "/")
    query = f"state={STATE}&error=access_denied"
    status, location, _ = await _get(anonymous.client, f"{OIDC}/callback?{query}", sealed)
    assert (status, location) == (303, "/?signInError=cancelled")


async def test_a_cookie_sealed_under_another_key_is_an_api_clients_refusal(anonymous: Api) -> None:
    login = LoginState(STATE, "n", "v" * 48, "cookie", RETURN_TO)
    forged = loginstate.seal(loginstate.new_key(), login)
    status, location, body = await _get(anonymous.client, f"{OIDC}/callback?state={STATE}", forged)
    assert (status, location, body["code"]) == (401, "", "Unauthorized"), body
