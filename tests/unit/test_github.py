"""The GitHub provider's pure rules (its configuration, its access modes, its principals) and
its client against the local stand-in for GitHub on loopback (tools/devenv: GitHub itself
cannot be reached here): paging, the code exchange, a refused code, a token revoked, and a
page link that leads to another host."""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from corral.core import pki
from corral.core.auth import github_config, principals
from corral.core.auth.github_config import GithubConfig
from corral.core.auth.principals import Identity
from corral.core.errors import Invalid
from corral.core.github.client import CodeRefused, Github, GithubError, TokenRefused
from corral.devenv.controlplane import free_port
from corral.devenv.github import GithubStandIn

CALLBACK = "https://corral.example.com/v3-public/githubProviders/github/callback"


# -- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize("hostname", ["github.com", "github.example.com", "127.0.0.1:8443"])
def test_good_hostnames(hostname: str) -> None:
    assert github_config.check_hostname(hostname) == hostname


@pytest.mark.parametrize("hostname", [
    "", "https://github.com", "github.com/path", "user@github.com", "github.com:0",
    "github.com:99999", "git hub.com", "github.com?x", 7, "x" * 254,
])  # fmt: skip
def test_bad_hostnames(hostname: Any) -> None:
    with pytest.raises(Invalid) as caught:
        github_config.check_hostname(hostname)
    assert caught.value.field == "hostname"


def test_the_api_is_api_github_com_or_the_enterprise_path() -> None:
    assert GithubConfig().api_url == "https://api.github.com"
    assert GithubConfig().web_url == "https://github.com"
    enterprise = GithubConfig(hostname="ghe.example.com:8443")
    assert enterprise.api_url == "https://ghe.example.com:8443/api/v3"
    plain = GithubConfig(hostname="127.0.0.1:9", tls=False)
    assert plain.web_url == "http://127.0.0.1:9"


def test_a_put_merges_checked_fields_and_keeps_plain_http_to_loopback() -> None:
    current = GithubConfig(client_id="c")
    merged = github_config.merged(current, {"hostname": "ghe.example.com", "enabled": True})
    assert (merged.hostname, merged.client_id, merged.enabled) == ("ghe.example.com", "c", True)
    with pytest.raises(Invalid, match="loopback"):
        github_config.merged(merged, {"tls": False})
    assert not github_config.merged(current, {"hostname": "127.0.0.1:1", "tls": False}).tls
    with pytest.raises(Invalid) as caught:
        github_config.merged(GithubConfig(), {"enabled": True})
    assert caught.value.field == "clientId"
    with pytest.raises(Invalid) as caught:
        github_config.merged(current, {"hostname": "169.254.169.254"})
    assert caught.value.field == "hostname"
    assert github_config.merged(current, {"hostname": "169.254.169.254"}, True).hostname


@pytest.mark.parametrize("allowed", [
    ["someone"], ["github_user://abc"], ["oidc_group://eng"], "github_org://1",
    ["github_team://1"] * (github_config.MAX_ALLOWED + 1), [1],
])  # fmt: skip
def test_allowed_principals_are_github_ids(allowed: Any) -> None:
    with pytest.raises(Invalid) as caught:
        github_config.check_allowed(allowed)
    assert caught.value.field == "allowedPrincipalIds"


def test_the_certificate_must_be_pem_certificates() -> None:
    pem = pki.CertificateAuthority.create("x").cert_pem.decode()
    assert github_config.check_certificate(pem) == pem
    assert github_config.check_certificate("") == ""
    for bad in ("not a certificate", pem.replace("MII", "xyz", 1), 3, "x" * 70_000):
        with pytest.raises(Invalid):
            github_config.check_certificate(bad)


def test_access_modes() -> None:
    alice, acme = "github_user://1", "github_org://2"
    open_ = GithubConfig()
    required = GithubConfig(access_mode="required", allowed_principal_ids=(acme,))
    restricted = GithubConfig(access_mode="restricted", allowed_principal_ids=(acme,))
    assert github_config.admits(open_, [alice], member=False)
    assert github_config.admits(required, [alice, acme], member=False)
    assert not github_config.admits(required, [alice], member=True)
    assert github_config.admits(restricted, [alice], member=True)
    assert not github_config.admits(restricted, [alice], member=False)


def test_github_groups_may_be_bound() -> None:
    for group in ("github_org://12", "github_team://34", "keycloakoidc_group://eng"):
        assert principals.check_group_principal(group) == group
    with pytest.raises(Invalid):
        principals.check_group_principal("github_user://12")


# -- the client against the stand-in -----------------------------------------------------------


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GithubStandIn]:
    server = GithubStandIn(tmp_path_factory.mktemp("github"), "client", "secret", CALLBACK)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def client_of(stand_in: GithubStandIn, secret: str = "secret") -> Github:  # noqa: S107
    config = GithubConfig(hostname=stand_in.hostname, client_id="client",
                          certificate=stand_in.ca_pem)  # fmt: skip
    return Github(config, secret)


async def signed_in(stand_in: GithubStandIn, login: str) -> tuple[Github, Identity]:
    """The authorize page's code for `login` (as a browser signed in there would get it),
    exchanged and the user read."""
    client = client_of(stand_in)
    url, state = client.begin(CALLBACK, "json")
    code = await asyncio.to_thread(_authorized_code, stand_in, url, login)
    return client, await client.finish(code, state, CALLBACK)


def _authorized_code(stand_in: GithubStandIn, url: str, login: str) -> str:
    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *_: Any) -> None:
            return None

    context = ssl.create_default_context(cadata=stand_in.ca_pem)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), Stay())
    request = urllib.request.Request(url, headers={"Cookie": f"stand_in_user={login}"})
    try:
        opener.open(request, timeout=10)
    except urllib.error.HTTPError as error:
        query = urllib.parse.urlsplit(error.headers["Location"]).query
        return urllib.parse.parse_qs(query)["code"][0]
    raise AssertionError("no redirect")


async def test_a_sign_in_reads_every_page_of_orgs_and_teams(stand_in: GithubStandIn) -> None:
    org = stand_in.add_org("many")
    teams = [stand_in.add_team(org, f"t{i}") for i in range(130)]  # two pages of 100
    user = stand_in.add_user("paging", "Paging User", [org], teams)
    client, identity = await signed_in(stand_in, "paging")
    assert (identity.subject, identity.display_name) == (str(user), "Paging User")
    assert len(identity.groups) == 131
    assert f"github_team://{teams[-1]}" in identity.groups
    assert f"github_org://{org}" in identity.groups
    assert identity.credential
    again = await client.identity(identity.credential, identity.subject)
    assert again.groups == identity.groups


async def test_a_code_is_good_once_and_a_revoked_token_is_refused(
    stand_in: GithubStandIn,
) -> None:
    stand_in.add_user("once", "Once")
    client, identity = await signed_in(stand_in, "once")
    assert identity.credential is not None
    url, state = client.begin(CALLBACK, "json")
    code = await asyncio.to_thread(_authorized_code, stand_in, url, "once")
    await client.finish(code, state, CALLBACK)
    with pytest.raises(CodeRefused):
        await client.finish(code, state, CALLBACK)
    with pytest.raises(TokenRefused):
        await client.identity(identity.credential, "another subject")
    stand_in.revoke("once")
    with pytest.raises(TokenRefused):
        await client.identity(identity.credential, identity.subject)


async def test_a_wrong_secret_or_an_untrusted_host_cannot_be_used(
    stand_in: GithubStandIn, tmp_path: Path
) -> None:
    url, state = client_of(stand_in).begin(CALLBACK, "json")
    stand_in.add_user("tried", "Tried")
    code = await asyncio.to_thread(_authorized_code, stand_in, url, "tried")
    with pytest.raises(GithubError, match="incorrect_client_credentials"):
        await client_of(stand_in, "wrong").finish(code, state, CALLBACK)
    foreign_ca = pki.CertificateAuthority.create("o").cert_pem.decode()
    other = GithubConfig(hostname=stand_in.hostname, client_id="client", certificate=foreign_ca)
    with pytest.raises(GithubError, match="CERTIFICATE_VERIFY_FAILED"):
        await Github(other, "secret").identity("token")


async def test_a_page_link_to_another_host_is_refused(tmp_path: Path) -> None:
    """The access token goes to the configured API only: a `Link: next` elsewhere ends it."""
    ca = pki.CertificateAuthority.create("link-ca")
    cert, key = ca.issue_server("link-server", ["127.0.0.1"]).write(tmp_path, "link")
    port = free_port()

    async def orgs(request: web.Request) -> web.Response:
        return web.json_response([{"id": 1}], headers={
            "Link": '<https://evil.example.com/api/v3/user/orgs?page=2>; rel="next"'})  # fmt: skip

    async def user(request: web.Request) -> web.Response:
        return web.json_response({"id": 5, "login": "x"})

    app = web.Application()
    app.add_routes([web.get("/api/v3/user", user), web.get("/api/v3/user/orgs", orgs)])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    try:
        config = GithubConfig(hostname=f"127.0.0.1:{port}", client_id="c",
                              certificate=ca.cert_pem.decode())  # fmt: skip
        with pytest.raises(GithubError, match="off the configured GitHub API"):
            await Github(config, "s").identity("token")
    finally:
        await runner.cleanup()
