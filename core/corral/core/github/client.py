"""GitHub as the GitHub sign-in provider uses it (GitHub's documented OAuth app flow and REST
API): the authorize URL, the code exchange (`POST <host>/login/oauth/access_token`), and with
the user's access token `GET /user`, `GET /user/orgs` and `GET /user/teams` on the REST API
(`api.github.com`, or `<host>/api/v3` for GitHub Enterprise Server).

Every call goes to the configured host only (a `Link: next` page elsewhere is refused, no
redirect is followed), with a timeout, its answer read to at most MAX_BODY bytes and at most
MAX_PAGES pages of each list. Nothing here logs the code, the client secret or a token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import ssl
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp

from corral.core.auth import principals
from corral.core.auth.github_config import SCOPE, GithubConfig
from corral.core.auth.loginstate import LoginState
from corral.core.auth.principals import Identity

TIMEOUT_SECONDS = 10.0
MAX_BODY = 1024 * 1024
PER_PAGE = 100
MAX_PAGES = 6  # 600 organisations or teams: more than a user's record keeps (MAX_GROUPS)
MAX_TOKEN = 1024
_API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
_USER_AGENT = {"User-Agent": "corral"}  # GitHub refuses API requests without one


class GithubError(Exception):
    """GitHub cannot be used: unreachable, misconfigured (the client credentials refused),
    or an answer that is not GitHub's. The message names the rule, never a secret."""


class CodeRefused(GithubError):
    """GitHub refused the authorization code (`bad_verification_code`): sign in again."""


class CredentialsRefused(GithubError):
    """GitHub refused the client id or secret (`incorrect_client_credentials`)."""


class TokenRefused(GithubError):
    """GitHub refused the access token (401): the user revoked the app or was removed."""


class Github:
    """One configuration of the provider and its client secret, with the TLS context its
    host is trusted by."""

    def __init__(self, config: GithubConfig, client_secret: str) -> None:
        self.config = config
        self._secret = client_secret
        # The configured CAs alone when given (the system's are then not loaded), else the
        # system's.
        self._tls = ssl.create_default_context(cadata=config.certificate or None)

    def begin(self, redirect_uri: str, response_type: str) -> tuple[str, LoginState]:
        """The authorize URL of a new sign-in (state and PKCE S256, which GitHub supports;
        no nonce: there is no ID token), and what its end must know."""
        verifier = secrets.token_urlsafe(48)
        login = LoginState(state=secrets.token_urlsafe(24), nonce="", code_verifier=verifier,
                           response_type=response_type)  # fmt: skip
        digest = hashlib.sha256(login.code_verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        return self.authorize_url(redirect_uri, login.state, challenge), login

    async def finish(self, code: str, login: LoginState, redirect_uri: str) -> Identity:
        """The user a code of this sign-in is, with their organisations and teams."""
        return await self.identity(await self.exchange(code, redirect_uri, login.code_verifier))

    def authorize_url(self, redirect_uri: str, state: str, code_challenge: str) -> str:
        query = urlencode({
            "client_id": self.config.client_id, "redirect_uri": redirect_uri, "scope": SCOPE,
            "state": state, "code_challenge": code_challenge, "code_challenge_method": "S256",
            "allow_signup": "false",
        })  # fmt: skip
        return f"{self.config.web_url}/login/oauth/authorize?{query}"

    async def exchange(self, code: str, redirect_uri: str, code_verifier: str | None) -> str:
        """The access token for an authorization code (JSON asked, as GitHub allows)."""
        form = {"client_id": self.config.client_id, "client_secret": self._secret,
                "code": code, "redirect_uri": redirect_uri}  # fmt: skip
        if code_verifier:
            form["code_verifier"] = code_verifier
        url = f"{self.config.web_url}/login/oauth/access_token"
        async with self._session() as session:
            try:
                accept = {"Accept": "application/json"}
                async with session.post(
                    url, data=form, headers=accept, allow_redirects=False
                ) as answer:
                    body = await _json(answer, "the code exchange")
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise GithubError(f"code exchange failed: {_why(exc)}") from None
        if not isinstance(body, dict):
            raise GithubError("the code exchange's answer is not an object")
        error = body.get("error")
        if error == "bad_verification_code":
            raise CodeRefused("GitHub refused the code (bad_verification_code)")
        if error == "incorrect_client_credentials":
            raise CredentialsRefused("GitHub refused the client id or secret "
                                     "(incorrect_client_credentials)")  # fmt: skip
        if error is not None:
            raise GithubError(f"GitHub refused the code exchange ({str(error)[:64]})")
        token = body.get("access_token")
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN or not token.isprintable():
            raise GithubError("the code exchange's answer has no access token")
        return token

    async def identity(self, access_token: str, subject: str | None = None) -> Identity:
        """Who the token is (`GET /user`), with their organisations and teams as groups;
        when `subject` is given, the token must still be that user's."""
        async with self._session() as session:
            try:
                user = await self._get(session, access_token, "/user")
                if not isinstance(user, dict) or not _is_id(user.get("id")):
                    raise GithubError("GET /user did not name a user id")
                found = str(user["id"])
                if subject is not None and found != subject:
                    raise TokenRefused("the access token is now another user's")
                orgs = await self._list(session, access_token, "/user/orgs")
                teams = await self._list(session, access_token, "/user/teams")
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise GithubError(f"the GitHub API cannot be read: {_why(exc)}") from None
        groups = sorted({f"{principals.GITHUB_ORG}{o['id']}" for o in orgs if _is_id(o.get("id"))}
                        | {f"{principals.GITHUB_TEAM}{t['id']}" for t in teams
                           if _is_id(t.get("id"))})  # fmt: skip
        name = user.get("name") or user.get("login") or found
        return Identity(
            subject=found,
            groups=groups[: principals.MAX_GROUPS],
            display_name=name[: principals.MAX_NAME] if isinstance(name, str) else found,
            credential=access_token,
        )

    def _session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS),
            connector=aiohttp.TCPConnector(ssl=self._tls),
            headers=_USER_AGENT,
        )

    async def _get(self, session: aiohttp.ClientSession, token: str, path: str) -> Any:
        body, _ = await self._page(session, token, self.config.api_url + path)
        return body

    async def _list(
        self, session: aiohttp.ClientSession, token: str, path: str
    ) -> list[dict[str, Any]]:
        """Every page of a list, following `Link: rel="next"` on the API's own host."""
        found: list[dict[str, Any]] = []
        url: str | None = f"{self.config.api_url}{path}?per_page={PER_PAGE}"
        for _ in range(MAX_PAGES):
            if url is None:
                break
            body, url = await self._page(session, token, url)
            if not isinstance(body, list):
                raise GithubError(f"GET {path} did not answer a list")
            found.extend(item for item in body if isinstance(item, dict))
        return found

    async def _page(
        self, session: aiohttp.ClientSession, token: str, url: str
    ) -> tuple[Any, str | None]:
        headers = {**_API_HEADERS, "Authorization": f"Bearer {token}"}
        async with session.get(url, headers=headers, allow_redirects=False) as answer:
            path = urlsplit(url).path
            if answer.status == 401:
                raise TokenRefused(f"GitHub refused the access token (401 on {path})")
            body = await _json(answer, f"GET {path}")
            following = answer.links.get("next")
            link = following.get("url") if following is not None else None
        return body, self._same_api(str(link)) if link is not None else None

    def _same_api(self, url: str) -> str:
        base, given = urlsplit(self.config.api_url), urlsplit(url)
        if (given.scheme, given.netloc) != (base.scheme, base.netloc):
            raise GithubError("a page link leads off the configured GitHub API")
        if not given.path.startswith(base.path + "/"):
            raise GithubError("a page link leads off the configured GitHub API")
        return url


async def _json(answer: aiohttp.ClientResponse, what: str) -> Any:
    if answer.status != 200:
        raise GithubError(f"{what} answered {answer.status}")
    raw = bytearray()
    async for chunk in answer.content.iter_chunked(64 * 1024):
        raw.extend(chunk)
        if len(raw) > MAX_BODY:
            raise GithubError(f"{what} answered more than {MAX_BODY} bytes")
    try:
        return json.loads(raw)
    except ValueError:
        raise GithubError(f"{what} did not answer JSON") from None


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


class Clients:
    """One Github per configuration and client secret, so a TLS context is made once per
    configuration, not per sign-in."""

    def __init__(self) -> None:
        self._current: tuple[tuple[GithubConfig, str], Github] | None = None

    def get(self, config: GithubConfig, client_secret: str) -> Github:
        key = (config, hashlib.sha256(client_secret.encode()).hexdigest())
        if self._current is None or self._current[0] != key:
            self._current = (key, Github(config, client_secret))
        return self._current[1]
