"""What a machine reaches before it is a node (docs/design/real-machines.md, sections 2-3):
corral's CA (`/cacerts`), the node installer and its uninstaller (`/v3/connect/install.sh`,
`/v3/connect/uninstall.sh`), all public, and `POST /v3/connect/register`, whose only
credential is a cluster registration token (`services.registering`).
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from corral.apiserver.deps import deps
from corral.apiserver.http.body import read_json
from corral.apiserver.http.errors import ApiError
from corral.apiserver.services import registering
from corral.core import errors
from corral.core.registration import command, request

routes = web.RouteTableDef()

# A registration is a handful of short fields.
REGISTER_LIMIT = 16 * 1024
_SCRIPTS = resources.files("corral.apiserver") / "node"
INSTALL = (_SCRIPTS / "install.sh").read_bytes()
UNINSTALL = (_SCRIPTS / "uninstall.sh").read_bytes()
SCRIPT_TYPE = "text/x-shellscript"
# The same answer for every token that registers nothing: whether it never existed, was
# revoked, rotated away or expired is not said to whoever holds it.
MSG_BAD_TOKEN = "registration token is not valid"


@routes.get(command.CA_PATH)
async def cacerts(request: web.Request) -> web.Response:
    ca = deps(request).corral_ca
    if ca is None:
        raise errors.not_found("corral's certificate is signed by a CA clients already trust")
    return web.Response(body=ca, content_type="text/plain")


@routes.get(command.INSTALL_PATH)
async def install(request: web.Request) -> web.Response:
    return web.Response(body=INSTALL, content_type=SCRIPT_TYPE)


@routes.get("/v3/connect/uninstall.sh")
async def uninstall(request: web.Request) -> web.Response:
    return web.Response(body=UNINSTALL, content_type=SCRIPT_TYPE)


@routes.post("/v3/connect/register")
async def register(http: web.Request) -> web.Response:
    held = deps(http)
    scheme, _, value = http.headers.get("Authorization", "").strip().partition(" ")
    token = registering.presented(held, value.strip()) if scheme.lower() == "bearer" else None
    if token is None:
        raise ApiError(401, "Unauthorized", MSG_BAD_TOKEN)
    machine = request.parse(await read_json(http, REGISTER_LIMIT))
    tar = await registering.register(held, token, machine)
    return web.Response(body=tar, content_type="application/x-tar")
