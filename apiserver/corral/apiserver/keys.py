"""Typed keys of what the application object holds."""

from __future__ import annotations

from aiohttp import web
from lightkube import AsyncClient

from corral.apiserver.readiness import Readiness

KUBE = web.AppKey("kube", AsyncClient)
READINESS = web.AppKey("readiness", Readiness)
