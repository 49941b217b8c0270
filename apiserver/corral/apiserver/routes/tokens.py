"""`/v3/token` and `/v3/tokens` (spec 4.1): a user's own tokens, logout and logoutAll."""

from __future__ import annotations

import datetime
from typing import Any

from aiohttp import web

from corral.apiserver.auth.authn import CSRF_COOKIE, SESSION_COOKIE, Principal, principal
from corral.apiserver.deps import DEPS, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import AUTH_LIMIT, description_text, or_empty, read_json, referenced
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import tokens
from corral.apiserver.services.visibility import visible_cluster
from corral.core import errors, times
from corral.core.auth import ttl
from corral.core.auth.tokens import MSG_NOT_FOUND, TokenRecord, is_system_name

SCHEMA = Schema(
    id="token",
    plural="tokens",
    fields={
        "name": readonly("string"),
        "description": Field("string", create=True),
        "userId": readonly("reference[user]"),
        "authProvider": readonly("string"),
        "isDerived": readonly("boolean"),
        "current": readonly("boolean", "True for the token that authenticated this request"),
        "enabled": readonly("boolean"),
        "expired": readonly("boolean"),
        "expiresAt": readonly("string", "Creation time plus ttl; empty when it never expires"),
        "ttl": Field("int", create=True, description="Lifetime in ms, up to 100 years; 0: the max"),
        "ttlMillis": Field("int", create=True, write_only=True, description="Alias of ttl"),
        "clusterId": Field("reference[cluster]", create=True, description="Cluster scope"),
        "clusterName": readonly("string", "Cluster scope; empty for none"),
        "token": Field("string", write_only=True, description="`<name>:<key>`, on creation only"),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET", "POST"),
    collection_actions={"logout": {}, "logoutAll": {}},
)

CANNOT_DELETE_SESSION = "Cannot delete token for current session (use logout instead)"

routes = web.RouteTableDef()


def fields(record: TokenRecord, current: str, now: datetime.datetime) -> dict[str, Any]:
    """All of the resource's fields: each is small, so collections filter and sort by them."""
    expiry = record.expires_at()
    return {
        "id": record.name,
        "name": record.name,
        "description": record.description,
        "userId": record.user_id,
        "authProvider": record.auth_provider,
        "isDerived": record.is_derived,
        "current": record.name == current,
        "enabled": record.enabled,
        "expired": record.expired(now),
        "expiresAt": times.format_time(expiry) if expiry else "",
        "ttl": record.ttl_ms,
        "clusterName": record.cluster_name,
        "clusterId": record.cluster_name,
        "created": times.format_time(record.created),
        "uuid": record.uid,
    }


def render(base: str, record: TokenRecord, current: str, now: datetime.datetime) -> dict[str, Any]:
    return envelope.resource(base, SCHEMA, fields(record, current, now))


def own_token(request: web.Request, who: Principal, name: str) -> TokenRecord:
    """The caller's token by name; another user's token, and a system token (whoever holds
    it, administrators included), are indistinguishable from none."""
    obj = request.app[DEPS].stores.tokens.get(name)
    if obj is None:
        raise errors.not_found(MSG_NOT_FOUND)
    record = TokenRecord.from_object(obj)
    if record.user_id != who.user_id or record.is_system:
        raise errors.not_found(MSG_NOT_FOUND)
    return record


@routes.get(v3("tokens|token"))
async def list_tokens(request: web.Request) -> web.Response:
    who, now = principal(request), datetime.datetime.now(datetime.UTC)
    base = base_url(request)
    current = who.token.name
    records = [
        record
        for obj in request.app[DEPS].stores.tokens.by_index("user", who.user_id)
        if not (record := TokenRecord.from_object(obj)).is_system
    ]
    body = envelope.collection(
        base,
        SCHEMA,
        records,
        lambda record: record.name,
        lambda record: fields(record, current, now),
        lambda record: render(base, record, current, now),
        request.query,
        request.path,
        can_create=True,
    )
    return web.json_response(body)


@routes.post(v3("tokens|token"))
async def create_or_act(request: web.Request) -> web.StreamResponse:
    action = request.query.get("action")
    if action == "logout":
        return await logout(request)
    if action == "logoutAll":
        return await logout_all(request)
    if action is not None:
        raise ApiError(422, "InvalidAction", f"Invalid action: {action}")
    return await create_token(request)


async def create_token(request: web.Request) -> web.Response:
    who = principal(request)
    body = SCHEMA.writable(await read_json(request, AUTH_LIMIT), creating=True)
    requested = ttl.requested(body.get("ttlMillis", body.get("ttl", 0)))
    description = description_text(body)
    cluster = or_empty(body.get("clusterId"), "")
    if not isinstance(cluster, str):
        raise errors.invalid("clusterId", "clusterId must be a cluster id")
    if cluster:
        referenced(
            lambda: visible_cluster(deps(request), caller(request), cluster), "clusterId", "cluster"
        )
    issued = await tokens.issue_api_token(request, who, requested, description, cluster)
    now = datetime.datetime.now(datetime.UTC)
    rendered = render(base_url(request), TokenRecord.from_object(issued.obj), "", now)
    return web.json_response({**rendered, "token": issued.value}, status=201)


@routes.get(v3("tokens|token", "/{name}"))
async def get_token(request: web.Request) -> web.Response:
    who = principal(request)
    record = own_token(request, who, request.match_info["name"])
    now = datetime.datetime.now(datetime.UTC)
    return web.json_response(render(base_url(request), record, who.token.name, now))


@routes.delete(v3("tokens|token", "/{name}"))
async def delete_token(request: web.Request) -> web.Response:
    who = principal(request)
    name = request.match_info["name"]
    # By name, before any lookup: the names are fixed and documented, so the answer tells
    # nobody whether one exists.
    if is_system_name(name):
        raise errors.forbidden(f"{name} is a system token: it cannot be deleted through the API")
    record = own_token(request, who, name)
    if record.name == who.token.name and record.is_session:
        raise ApiError(400, "InvalidAction", CANNOT_DELETE_SESSION)
    await tokens.revoke(request, record.name)
    return web.Response(status=204)


def clear_cookies(response: web.StreamResponse, secure: bool) -> None:
    for cookie in (SESSION_COOKIE, CSRF_COOKIE):
        response.set_cookie(cookie, "", max_age=0, path="/", secure=secure,
                            httponly=cookie == SESSION_COOKIE, samesite="Lax")  # fmt: skip


async def logout(request: web.Request) -> web.Response:
    """Ends the session this request belongs to; an API token is not a session."""
    who = principal(request)
    if not who.token.is_session:
        message = "logout ends a session; delete an API token with DELETE instead"
        raise ApiError(400, "InvalidAction", message)
    await tokens.revoke(request, who.token.name)
    response = web.Response(status=200)
    clear_cookies(response, request.secure)
    return response


async def logout_all(request: web.Request) -> web.Response:
    """Deletes every token of the caller, this one included (system tokens excepted)."""
    who = principal(request)
    await tokens.revoke_all(request, who.user_id)
    response = web.Response(status=200)
    clear_cookies(response, request.secure)
    return response
