"""Where resources are: the /v3 route patterns and the base of every link."""

from __future__ import annotations

from aiohttp import web

from corral.apiserver.keys import EXTERNAL_URL


def v3(plural: str, rest: str = "") -> str:
    """A /v3 route whose type name matches in any case (`globalRoleBindings` as well)."""
    return f"/v3/{{type:(?i:{plural})}}{rest}"


def base_url(request: web.Request) -> str:
    """The configured external URL: a Host header is the client's to choose, so it never
    reaches a link or a kubeconfig."""
    return request.app[EXTERNAL_URL]
