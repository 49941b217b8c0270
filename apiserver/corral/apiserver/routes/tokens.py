"""`/v3/token` and `/v3/tokens` (spec 4.1): a user's own tokens, logout and logoutAll."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from corral.apiserver.auth import sessions
from corral.apiserver.auth.authn import principal
from corral.apiserver.deps import caller, deps
from corral.apiserver.http.body import AUTH_LIMIT, read_input
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services import tokens
from corral.core import times
from corral.core.auth.tokens import MSG_NOT_FOUND, TokenRecord

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


@dataclass(frozen=True)
class Shown:
    """A token as a response shows it: its `<name>:<key>` only in the answer to its creation."""

    record: TokenRecord
    value: str = ""


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


def shown_fields(ask: Ask, shown: Shown) -> dict[str, Any]:
    return fields(shown.record, ask.who.principal.token.name, ask.now)


def rendering_key(ask: Ask, shown: Shown) -> tuple[str, str] | None:
    """A token renders the same for one version of its object, but for `varying`; never kept
    is the answer to its creation, which shows its value."""
    record = shown.record
    return None if shown.value or not record.version else (record.name, record.version)


def varying(ask: Ask, shown: Shown) -> dict[str, Any]:
    """What of a token's rendering depends on the request: which token asks, and the time."""
    record = shown.record
    return {
        "current": record.name == ask.who.principal.token.name,
        "expired": record.expired(ask.now),
    }


def find(ask: Ask, name: str) -> Shown | None:
    record = tokens.own(ask.deps, ask.who, name)
    return None if record is None else Shown(record)


async def create(ask: Ask, body: dict[str, Any]) -> Shown:
    issued = await tokens.create(ask.deps, ask.who, body)
    return Shown(TokenRecord.from_object(issued.obj), issued.value)


def may_delete(ask: Ask, shown: Shown) -> None:
    """The token of this session ends by logout only."""
    if shown.record.name == ask.who.principal.token.name and shown.record.is_session:
        raise ApiError(400, "InvalidAction", CANNOT_DELETE_SESSION)


FAMILY = Family[Shown](
    schema=SCHEMA,
    listed=lambda ask: [Shown(record) for record in tokens.listed(ask.deps, ask.who)],
    find=find,
    fields=shown_fields,
    ident=lambda shown: shown.record.name,
    detail=lambda ask, shown: {"token": shown.value} if shown.value else {},
    rendering_key=rendering_key,
    varying=varying,
    create=create,
    before_delete=may_delete,
    collection=v3("tokens|token"),
    missing=MSG_NOT_FOUND,
    body_limit=AUTH_LIMIT,
)


async def logout(request: web.Request) -> web.Response:
    """Ends the session this request belongs to; an API token is not a session."""
    await read_input(request, "logout", AUTH_LIMIT)
    token = principal(request).token
    if not token.is_session:
        message = "logout ends a session; delete an API token with DELETE instead"
        raise ApiError(400, "InvalidAction", message)
    await tokens.revoke(deps(request), token.name)
    return sessions.signed_out(request)


async def logout_all(request: web.Request) -> web.Response:
    """Deletes every token of the caller, this one included (system tokens excepted)."""
    await read_input(request, "logoutAll", AUTH_LIMIT)
    await tokens.revoke_all(deps(request), caller(request))
    return sessions.signed_out(request)


routes = handlers.routes(FAMILY, collection_actions={"logout": logout, "logoutAll": logout_all})


@routes.delete(v3("tokens|token", "/{id}"))
async def delete_token(request: web.Request) -> web.Response:
    """A system token is refused (403) before any lookup, by its documented name; the token
    of this session only by logout (400)."""
    tokens.refuse_system(request.match_info["id"])
    asked, shown = await handlers.found(FAMILY, request)
    may_delete(asked, shown)
    await tokens.revoke(asked.deps, shown.record.name)
    return web.Response(status=204)
