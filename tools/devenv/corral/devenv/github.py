"""A local stand-in for GitHub, for the e2e tests of the GitHub sign-in provider: GitHub itself
cannot be reached from where the tests run. It is NOT GitHub and not part of corral: it serves
only the few documented endpoints corral's provider uses, with their documented shapes, as a
GitHub Enterprise Server does (OAuth on the host, the REST API under `/api/v3`):

- `GET /login/oauth/authorize` (client_id, redirect_uri, scope, state, PKCE S256): GitHub asks
  the signed-in user to authorise the app; the stand-in's user has authorised it already, so
  it redirects back at once with `code` and `state` (or `error=redirect_uri_mismatch`).
- `POST /login/oauth/access_token` (form or JSON): the code (one use, 10 minutes, bound to its
  client, redirect_uri and PKCE challenge) for an access token, answered as JSON when the
  request's Accept asks for it and form-encoded otherwise, as GitHub does; a refused code is
  still 200 with `error=bad_verification_code`.
- `GET /api/v3/user`, `/api/v3/user/orgs`, `/api/v3/user/teams` with `Authorization: Bearer`
  (or `token`): 401 `Bad credentials` for a token it did not issue or revoked; lists paged by
  `per_page` (at most 100) and `page`, with a `Link: rel="next"` header.

Who is signed in at "GitHub" is the stand-in's own: `GET /stand-in/session?login=<login>` sets
a cookie naming one of its users, as signing in at github.com would. The users, organisations
and teams are the test's (`add_org`, `add_team`, `add_user`, `leave_team`, `revoke`). It serves
HTTPS with a CA of its own (`ca_pem`), which the test hands to corral in the GitHub
configuration's `certificate`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from corral.core import pki
from corral.devenv.controlplane import free_port

CODE_SECONDS = 600
MAX_PER_PAGE = 100
SESSION_COOKIE = "stand_in_user"


@dataclass
class User:
    id: int
    login: str
    name: str
    orgs: set[int] = field(default_factory=set)
    teams: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Grant:
    client_id: str
    redirect_uri: str
    login: str
    challenge: str
    scope: str
    expires: float


class GithubStandIn:
    """The stand-in on 127.0.0.1:<free port>, one OAuth app (`client_id`, `client_secret`,
    `callback`); `start()` runs it in a thread of its own, `stop()` ends it."""

    def __init__(self, directory: Path, client_id: str, client_secret: str, callback: str):
        self.client_id, self.client_secret, self.callback = client_id, client_secret, callback
        self.port = free_port()
        self.hostname = f"127.0.0.1:{self.port}"
        ca = pki.CertificateAuthority.create("github-stand-in-ca")
        self.ca_pem = ca.cert_pem.decode()
        self._cert, self._key = ca.issue_server("github-stand-in", ["127.0.0.1"]).write(
            directory, "github-stand-in"
        )
        self.users: dict[str, User] = {}
        self.orgs: dict[int, str] = {}
        self.teams: dict[int, tuple[str, int]] = {}  # id -> (slug, organisation id)
        self._grants: dict[str, Grant] = {}
        self._tokens: dict[str, tuple[str, str]] = {}  # token -> (login, scope)
        self._ids = iter(range(1000, 10**9))
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    # --- what the test sets up ---------------------------------------------------------

    def add_org(self, login: str) -> int:
        with self._lock:
            org = next(self._ids)
            self.orgs[org] = login
            return org

    def add_team(self, org: int, slug: str) -> int:
        with self._lock:
            team = next(self._ids)
            self.teams[team] = (slug, org)
            return team

    def add_user(self, login: str, name: str, orgs: Sequence[int] = (),
                 teams: Sequence[int] = ()) -> int:  # fmt: skip
        with self._lock:
            user = User(next(self._ids), login, name, set(orgs), set(teams))
            self.users[login] = user
            return user.id

    def leave_team(self, login: str, team: int) -> None:
        with self._lock:
            self.users[login].teams.discard(team)

    def revoke(self, login: str) -> None:
        """Every token of the user stops working, as revoking the app's authorisation does."""
        with self._lock:
            self._tokens = {t: v for t, v in self._tokens.items() if v[0] != login}

    # --- running ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://{self.hostname}"

    def start(self) -> GithubStandIn:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        app.add_routes([
            web.get("/stand-in/session", self._session),
            web.get("/login/oauth/authorize", self._authorize),
            web.post("/login/oauth/access_token", self._access_token),
            web.get("/api/v3/user", self._user),
            web.get("/api/v3/user/orgs", self._user_orgs),
            web.get("/api/v3/user/teams", self._user_teams),
        ])  # fmt: skip
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self._cert, self._key)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=context).start()

    # --- OAuth -----------------------------------------------------------------------

    async def _session(self, request: web.Request) -> web.Response:
        login = request.query.get("login", "")
        if login not in self.users:
            return web.Response(status=404, text="no such user")
        response = web.Response(text=f"signed in as {login}")
        response.set_cookie(SESSION_COOKIE, login, secure=True, httponly=True)
        return response

    async def _authorize(self, request: web.Request) -> web.Response:
        query = request.query
        if query.get("client_id") != self.client_id:
            return web.Response(status=404, text="no OAuth app with this client_id")
        redirect_uri = query.get("redirect_uri") or self.callback
        if not _under(redirect_uri, self.callback):
            return _redirect(self.callback, {"error": "redirect_uri_mismatch",
                                             "state": query.get("state", "")})  # fmt: skip
        login = request.cookies.get(SESSION_COOKIE)
        if login not in self.users:
            return web.Response(status=401, text="sign in to GitHub first")
        challenge = query.get("code_challenge", "")
        if challenge and query.get("code_challenge_method") != "S256":
            return _redirect(redirect_uri, {"error": "invalid_request",
                                            "state": query.get("state", "")})  # fmt: skip
        code = secrets.token_hex(10)
        with self._lock:
            expires = time.monotonic() + CODE_SECONDS
            self._grants[code] = Grant(self.client_id, redirect_uri, login, challenge,
                                       query.get("scope", ""), expires)  # fmt: skip
        answer = {"code": code}
        if "state" in query:
            answer["state"] = query["state"]
        return _redirect(redirect_uri, answer)

    async def _access_token(self, request: web.Request) -> web.Response:
        if request.content_type == "application/json":
            given: dict[str, Any] = dict(await request.json())
        else:
            given = dict(await request.post())
        client = (given.get("client_id"), given.get("client_secret"))
        if client != (self.client_id, self.client_secret):
            return _token_answer(request, {"error": "incorrect_client_credentials",
                                           "error_description": "The client_id and/or "
                                           "client_secret passed are incorrect."})  # fmt: skip
        with self._lock:
            grant = self._grants.pop(str(given.get("code", "")), None)
        if grant is None or grant.expires < time.monotonic() or not _verified(grant, given):
            return _token_answer(request, {"error": "bad_verification_code",
                                           "error_description": "The code passed is incorrect "
                                           "or expired."})  # fmt: skip
        if given.get("redirect_uri") and given["redirect_uri"] != grant.redirect_uri:
            return _token_answer(request, {"error": "redirect_uri_mismatch"})
        token = "gho_" + secrets.token_urlsafe(27)
        with self._lock:
            self._tokens[token] = (grant.login, grant.scope)
        return _token_answer(request, {"access_token": token, "token_type": "bearer",
                                       "scope": grant.scope.replace(" ", ",")})  # fmt: skip

    # --- REST ------------------------------------------------------------------------

    def _caller(self, request: web.Request) -> tuple[User, str]:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        with self._lock:
            held = self._tokens.get(token) if scheme.lower() in ("bearer", "token") else None
        if held is None or held[0] not in self.users:
            raise web.HTTPUnauthorized(
                text='{"message":"Bad credentials","documentation_url":'
                '"https://docs.github.com/rest","status":"401"}',
                content_type="application/json",
            )
        return self.users[held[0]], held[1]

    async def _user(self, request: web.Request) -> web.Response:
        user, _ = self._caller(request)
        return web.json_response({
            "login": user.login, "id": user.id, "node_id": _node("U", user.id),
            "avatar_url": "", "type": "User", "site_admin": False, "name": user.name,
            "url": f"{self.url}/api/v3/users/{user.login}",
        })  # fmt: skip

    async def _user_orgs(self, request: web.Request) -> web.Response:
        user, scope = self._caller(request)
        if "read:org" not in scope.split():
            return web.json_response([])  # without read:org, only public memberships
        orgs = [self._org(org) for org in sorted(user.orgs)]
        return self._page(request, orgs)

    async def _user_teams(self, request: web.Request) -> web.Response:
        user, scope = self._caller(request)
        if "read:org" not in scope.split():
            raise web.HTTPForbidden(
                text='{"message":"Resource not accessible by integration"}',
                content_type="application/json",
            )
        teams = []
        for team in sorted(user.teams):
            slug, org = self.teams[team]
            teams.append({"id": team, "node_id": _node("T", team), "name": slug, "slug": slug,
                          "description": "", "privacy": "closed", "permission": "pull",
                          "url": f"{self.url}/api/v3/teams/{team}",
                          "organization": self._org(org)})  # fmt: skip
        return self._page(request, teams)

    def _org(self, org: int) -> dict[str, Any]:
        login = self.orgs[org]
        return {"login": login, "id": org, "node_id": _node("O", org),
                "url": f"{self.url}/api/v3/orgs/{login}", "description": ""}  # fmt: skip

    def _page(self, request: web.Request, items: list[dict[str, Any]]) -> web.Response:
        try:
            per_page = min(int(request.query.get("per_page", "30")), MAX_PER_PAGE)
            page = max(int(request.query.get("page", "1")), 1)
        except ValueError:
            raise web.HTTPBadRequest() from None
        shown = items[(page - 1) * per_page : page * per_page]
        response = web.json_response(shown)
        if page * per_page < len(items):
            following = f"{self.url}{request.path}?per_page={per_page}&page={page + 1}"
            response.headers["Link"] = f'<{following}>; rel="next"'
        return response


def _under(uri: str, callback: str) -> bool:
    """GitHub's rule: same scheme, host and port as the registered callback URL, and its path
    a subdirectory of the callback's."""
    given, registered = urlsplit(uri), urlsplit(callback)
    same = (given.scheme, given.netloc) == (registered.scheme, registered.netloc)
    return same and given.path.startswith(registered.path)


def _verified(grant: Grant, given: dict[str, Any]) -> bool:
    if not grant.challenge:
        return True
    verifier = str(given.get("code_verifier", ""))
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == grant.challenge


def _token_answer(request: web.Request, body: dict[str, str]) -> web.Response:
    if "application/json" in request.headers.get("Accept", ""):
        return web.json_response(body)
    return web.Response(text=urlencode(body), content_type="application/x-www-form-urlencoded")


def _redirect(uri: str, query: dict[str, str]) -> web.Response:
    separator = "&" if urlsplit(uri).query else "?"
    return web.Response(status=302, headers={"Location": f"{uri}{separator}{urlencode(query)}"})


def _node(kind: str, number: int) -> str:
    return base64.b64encode(f"04:{kind}{number}".encode()).decode()
