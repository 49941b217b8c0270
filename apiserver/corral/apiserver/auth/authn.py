"""Who is calling: token extraction, validation, CSRF, rate limiting (spec 5, 7 and 8).

Every path but health, readiness and `/v3-public` needs a token: `Authorization: Bearer
<name>:<key>`, HTTP Basic with the name as user and the key as password, or the `R_SESS`
cookie. Requests authenticated by the cookie that change state must echo the `CSRF` cookie in
the `X-API-CSRF` header.
"""

from __future__ import annotations

import base64
import datetime
import hmac
from collections.abc import Hashable
from typing import NamedTuple

from aiohttp import web

from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.verified import Standing, VerifiedTokens
from corral.apiserver.http.errors import ApiError
from corral.apiserver.state.stores import Stores
from corral.core.auth.tokens import (
    MSG_INVALID,
    MSG_MISSING,
    AuthFailure,
    Policy,
    TokenRecord,
    good_until,
    split,
    standing,
    verified,
)
from corral.core.kube.impersonation import Impersonation

SESSION_COOKIE = "R_SESS"
CSRF_COOKIE = "CSRF"
CSRF_HEADER = "X-API-CSRF"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# The console's files are public: the page signs in through the API itself (routes.console).
# `/v3/import/`: the import manifests, whose registration token in the path is their only
# credential (routes.agents).
PUBLIC_PREFIXES = ("/healthz", "/readyz", "/v3-public/", "/assets/", "/static/", "/v3/import/")
# What a machine that has no user reaches: the node installer and corral's CA (public, as
# Rancher's), and registration, which checks the registration token it carries itself
# (routes.connect); and the console's page. Exact paths: nothing else under /v3/connect is let
# past.
PUBLIC_PATHS = frozenset(
    {
        "/",
        "/cacerts",
        "/v3/connect/install.sh",
        "/v3/connect/uninstall.sh",
        "/v3/connect/register",
        # A cluster agent's tunnel, whose only credential is the agent's (routes.agents).
        "/v3/connect",
    }
)
# The Kubernetes API of one cluster through corral: the only routes a token scoped to a
# cluster (every kubeconfig token) is good for.
PROXY_PATH = "/k8s/clusters/{cluster}"

_FAILURE_CODES = {401: "Unauthorized", 404: "NotFound", 410: "Gone", 422: "InvalidToken"}
# Who a user is downstream besides their id: administrators are the cluster's masters too.
ADMIN_GROUPS = ("system:masters", "system:authenticated")
USER_GROUPS = ("system:authenticated",)


class Principal(NamedTuple):
    """Who authenticated, made per request: a named tuple, quicker to make than a frozen
    dataclass."""

    user_id: str
    token: TokenRecord
    via_cookie: bool
    is_admin: bool
    # Group principals the user's provider last said they are in (`oidc_group://<name>`).
    groups: tuple[str, ...] = ()

    def downstream(self) -> Impersonation:
        """Who corral acts as in a cluster for this caller. The provider's groups go too:
        bindings of a group are RoleBindings to that Group downstream, so dropping the group
        upstream ends them at the next request."""
        base = ADMIN_GROUPS if self.is_admin else USER_GROUPS
        return Impersonation(self.user_id, (*base, *self.groups))


PRINCIPAL = web.RequestKey("principal", Principal)


def principal(request: web.Request) -> Principal:
    return request[PRINCIPAL]


def credential(request: web.Request) -> tuple[str | None, bool]:
    """The presented token value and whether it came from the session cookie."""
    header = request.headers.get("Authorization", "").strip()
    if header:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            return value.strip(), False
        if scheme.lower() == "basic":
            try:
                return base64.b64decode(value.strip(), validate=True).decode(), False
            except ValueError:  # not base64 (or not even ASCII), or not UTF-8
                raise ApiError(422, _FAILURE_CODES[422], MSG_INVALID) from None
        return None, False
    cookie = request.cookies.get(SESSION_COOKIE)
    return (cookie, True) if cookie else (None, False)


def proxied_cluster(request: web.Request) -> str | None:
    """The cluster whose Kubernetes API the request is for, as the router matched it; None
    for every other route (all of `/v3` included)."""
    resource = request.match_info.route.resource
    if resource is None:
        return None
    canonical = resource.canonical
    if canonical != PROXY_PATH and not canonical.startswith(PROXY_PATH + "/"):
        return None
    return request.match_info.get("cluster")


def verified_record(name: str, key: str, stores: Stores, known: VerifiedTokens) -> TokenRecord:
    """The record of token `name`, whose key `key` is: remembered when this key was verified
    against the token's current version, else found, parsed and verified (and remembered)."""
    record = known.get(name, key, stores.token_version(name))
    if record is not None:
        return record
    found = stores.token(name, key)
    record = verified(stores.token_record(found) if found else None, key)
    known.put(key, found["metadata"].get("resourceVersion") if found else None, record)
    return record


def authenticate(
    request: web.Request,
    stores: Stores,
    activity: ActivityTracker,
    known: VerifiedTokens,
    now: datetime.datetime,
) -> Principal:
    who = identify(request, stores, activity, known, now)
    activity.touch(who.token.name, now)
    return who


def identify(
    request: web.Request,
    stores: Stores,
    activity: ActivityTracker,
    known: VerifiedTokens,
    now: datetime.datetime,
) -> Principal:
    """Who the request's credential names, as `authenticate` finds them, without counting
    this as the session's activity: what a long-lived stream asks again while it is open (a
    subscription open in a tab keeps no session from going idle)."""
    value, via_cookie = credential(request)
    if not value:
        raise ApiError(401, "Unauthorized", MSG_MISSING)
    try:
        name, key = split(value)
        record = verified_record(name, key, stores, known)
    except AuthFailure as failure:
        raise _refused(failure) from None
    stamp = stores.standing_stamp()
    judged = known.standing(name)
    if judged is None or not judged.holds(stamp, now):
        judged = judge(record, stores, activity, stamp, now)
        known.judged(name, judged)
    cluster = record.cluster_name
    if cluster and proxied_cluster(request) != cluster:
        raise ApiError(401, "Unauthorized", f"token is valid only for cluster {cluster}")
    return Principal(record.user_id, record, via_cookie, judged.is_admin, judged.groups)


def judge(
    record: TokenRecord,
    stores: Stores,
    activity: ActivityTracker,
    stamp: Hashable,
    now: datetime.datetime,
) -> Standing:
    """Whether the holder of a verified token may call now and as whom, and until when that
    holds while `stamp` (what `Stores.standing_stamp` says of the caches it reads) stands."""
    last = activity.last_seen(record.name, record.last_activity)
    policy = Policy(idle_minutes=stores.number("auth-user-session-idle-ttl-minutes"))
    try:
        standing(record, stores.user_active(record.user_id), last, policy, now)
    except AuthFailure as failure:
        raise _refused(failure) from None
    if not stores.provider_enabled(record.auth_provider):
        # Disabling a provider ends what its sign-ins gave, derived tokens included.
        raise ApiError(401, "Unauthorized", "must authenticate, provider disabled")
    user = record.user_id
    until = good_until(record, last, policy)
    return Standing(stamp, until, stores.is_admin(user), stores.groups(user))


def _refused(failure: AuthFailure) -> ApiError:
    return ApiError(failure.status, _FAILURE_CODES[failure.status], failure.message)


def check_csrf(request: web.Request, who: Principal) -> None:
    if not who.via_cookie or request.method in SAFE_METHODS:
        return
    cookie = request.cookies.get(CSRF_COOKIE, "")
    header = request.headers.get(CSRF_HEADER, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), header.encode()):
        raise ApiError(422, "InvalidCSRFToken", "Invalid CSRF token")
