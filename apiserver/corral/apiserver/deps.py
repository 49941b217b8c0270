"""What the API server holds, made once by the application factory and handed to its parts.

Services are given a `Deps` and the `Caller` (`auth.authz`) instead of the request: they read
the caches and write through the management cluster's client, and never see HTTP. The
middleware and routes find it on the application under `DEPS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from lightkube import AsyncClient

from corral.apiserver.auth.access import Access, AccessMemo
from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.authn import principal
from corral.apiserver.auth.authz import Caller
from corral.apiserver.auth.ratelimit import RateLimiter
from corral.apiserver.auth.throttle import LoginThrottle
from corral.apiserver.auth.verified import VerifiedTokens
from corral.apiserver.http.renderings import Renderings
from corral.apiserver.http.rows import Fuller, Rows
from corral.apiserver.http.schemas import Registry
from corral.apiserver.readiness import Readiness
from corral.apiserver.state.derived import Derived
from corral.apiserver.state.stores import Stores
from corral.core.github.client import Clients
from corral.core.kube.connections import Connections
from corral.core.kube.oidc_secrets import StateKey
from corral.core.kube.tunnels import Tunnels
from corral.core.oidc.provider import Providers
from corral.core.workloads.kinds import Kind


@dataclass(frozen=True)
class Deps:
    kube: AsyncClient  # the management cluster, as corral itself
    stores: Stores
    connections: Connections  # downstream clusters
    tunnels: Tunnels  # the cluster agents' tunnels held here, which `connections` goes through
    # scheme://host[:port] clients reach this server at (CORRAL_EXTERNAL_URL).
    external_url: str
    # The CA of this server's certificate, for kubeconfigs; None when clients trust it already.
    corral_ca: bytes | None
    # This server's certificate (PEM), whose key the node command pins; None when unknown.
    serving_cert: bytes | None
    # The directory node drivers' file urls may name files below (CORRAL_DRIVER_FILE_DIR);
    # None when they are refused.
    driver_files: str | None
    # The directory GET /assets/<file> serves (CORRAL_NODE_ASSET_DIR); None serves nothing.
    node_assets: Path | None
    # The image the import manifest runs the cluster agent from (CORRAL_AGENT_IMAGE).
    agent_image: str
    features: Mapping[str, bool]
    providers: Providers
    github: Clients
    login_state_key: StateKey
    schemas: Registry
    access: AccessMemo
    activity: ActivityTracker
    verified: VerifiedTokens  # tokens whose key was verified, by version
    renderings: Renderings  # resources rendered once per version (`Family.rendering_key`)
    # Each project's workloads in id order (`services.workloads.visible`), by project id.
    workload_rows: Derived[str, Rows[tuple[Kind, str]]]
    # The same rows knowing each workload's state too, by project id.
    workload_states: Derived[str, Fuller[tuple[Kind, str]]]
    limiter: RateLimiter
    throttle: LoginThrottle
    readiness: Readiness


DEPS = web.AppKey("deps", Deps)


def deps(request: web.Request) -> Deps:
    return request.app[DEPS]


def base_url(request: web.Request) -> str:
    """The configured external URL: a Host header is the client's to choose, so it never
    reaches a link or a kubeconfig."""
    return request.app[DEPS].external_url


def caller(request: web.Request) -> Caller:
    """Who sent an authenticated request, with their access to clusters and projects."""
    who = principal(request)
    held = request.app[DEPS]
    return Caller(who, held.access.get(who.user_id, who.is_admin, held.stores))


def access(request: web.Request) -> Access:
    """The caller's access to clusters and projects."""
    return caller(request).access
