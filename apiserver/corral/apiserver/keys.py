"""Typed keys of what the application object holds."""

from __future__ import annotations

from aiohttp import web
from lightkube import AsyncClient

from corral.apiserver.auth.access import AccessMemo
from corral.apiserver.auth.activity import ActivityTracker
from corral.apiserver.auth.ratelimit import RateLimiter
from corral.apiserver.auth.throttle import LoginThrottle
from corral.apiserver.http.schemas import Registry
from corral.apiserver.readiness import Readiness
from corral.apiserver.state.stores import Stores
from corral.core.kube.connections import Connections
from corral.core.kube.oidc_secrets import StateKey
from corral.core.oidc.provider import Providers

KUBE = web.AppKey("kube", AsyncClient)
READINESS = web.AppKey("readiness", Readiness)
STORES = web.AppKey("stores", Stores)
ACTIVITY = web.AppKey("activity", ActivityTracker)
LIMITER = web.AppKey("limiter", RateLimiter)
SCHEMAS = web.AppKey("schemas", Registry)
FEATURES = web.AppKey("features", dict[str, bool])
THROTTLE = web.AppKey("throttle", LoginThrottle)
# The CA of this server's certificate, for kubeconfigs; None when clients trust it already.
CORRAL_CA: web.AppKey[bytes | None] = web.AppKey("corral_ca")
# scheme://host[:port] clients reach this server at (CORRAL_EXTERNAL_URL).
EXTERNAL_URL = web.AppKey("external_url", str)
# The directory node drivers' file urls may name files below (CORRAL_DRIVER_FILE_DIR); None
# when they are refused.
DRIVER_FILES: web.AppKey[str | None] = web.AppKey("driver_files")
CONNECTIONS = web.AppKey("connections", Connections)
ACCESS = web.AppKey("access", AccessMemo)
PROVIDERS = web.AppKey("providers", Providers)
LOGIN_STATE_KEY = web.AppKey("login_state_key", StateKey)
