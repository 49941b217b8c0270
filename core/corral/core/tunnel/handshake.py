"""What an agent presents when it dials (docs/design/cluster-agent.md, section 3): its
cluster's credential, and the parameters corral reaches its API server with, each checked and
bounded before the tunnel is accepted.

The credential is `<cluster id>:<value>`, the value 48 characters of the id alphabet; corral
keeps only its sha256, found by the cluster id and compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from corral.core.api import ids
from corral.core.errors import Invalid

PATH = "/v3/connect"
HEADER_VERSION = "X-Corral-Agent-Version"
HEADER_IMAGE = "X-Corral-Agent-Image"
HEADER_PARAMS = "X-Corral-Agent-Params"
# The lot: a CA bundle and a ServiceAccount token are a few KiB.
PARAMS_LIMIT = 16 * 1024
TEXT_LIMIT = 256
VALUE_LENGTH = 48
# WebSocket close codes of the application range (4000-4999).
CLOSE_REPLACED = 4000
# The credential the tunnel was opened with is no longer its cluster's (revoked, rotated, the
# cluster deleted): dialling again with it is refused.
CLOSE_REVOKED = 4001

_VALUE = re.compile(f"[{ids.ALPHABET}]{{{VALUE_LENGTH}}}", re.ASCII)
_CLUSTER = re.compile(r"c-[a-z0-9-]{1,60}", re.ASCII)
_TEXT = re.compile(r"[\x21-\x7e]{0,256}", re.ASCII)


def new_value() -> str:
    return "".join(secrets.choice(ids.ALPHABET) for _ in range(VALUE_LENGTH))


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def credential(cluster: str, value: str) -> str:
    """What the agent presents as its bearer token."""
    return f"{cluster}:{value}"


def presented(authorization: str) -> tuple[str, str] | None:
    """The cluster and value of an `Authorization: Bearer <cluster>:<value>` header; None for
    anything not shaped so (which is refused as any bad credential is)."""
    scheme, _, token = authorization.strip().partition(" ")
    cluster, _, value = token.strip().partition(":")
    if scheme.lower() != "bearer" or not _CLUSTER.fullmatch(cluster):
        return None
    if not _VALUE.fullmatch(value):
        return None
    return cluster, value


def matches(value: str, stored_digest: str) -> bool:
    return hmac.compare_digest(digest(value), stored_digest)


@dataclass(frozen=True)
class Params:
    """How corral reaches the agent's API server through the tunnel: TLS is end to end, so
    corral needs the server's name, its CA and the agent's ServiceAccount token."""

    server: str
    ca_cert: bytes
    token: str

    def header(self) -> str:
        document = {"server": self.server, "caCert": self.ca_cert.decode(), "token": self.token}
        return base64.b64encode(json.dumps(document).encode()).decode()

    def __repr__(self) -> str:
        return f"Params(server={self.server!r})"  # never the token


def params(header: str) -> Params:
    """The agent's parameters header, checked; `Invalid` naming the header otherwise."""
    if len(header) > PARAMS_LIMIT:
        raise _bad(f"is over {PARAMS_LIMIT} bytes")
    try:
        document: Any = json.loads(base64.b64decode(header, validate=True))
    except (binascii.Error, ValueError):
        raise _bad("is not base64 JSON") from None
    if not isinstance(document, dict) or set(document) != {"server", "caCert", "token"}:
        raise _bad("must hold exactly server, caCert and token")
    server, ca, token = document["server"], document["caCert"], document["token"]
    if not all(isinstance(v, str) for v in (server, ca, token)):
        raise _bad("holds a value that is not a string")
    parts = urlsplit(server)
    if parts.scheme != "https" or not parts.hostname or parts.path not in ("", "/"):
        raise _bad("server must be https://host[:port]")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise _bad("server must be https://host[:port]")
    if "-----BEGIN CERTIFICATE-----" not in ca:
        raise _bad("caCert must be PEM certificates")
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        raise _bad("token must be a bearer token")
    return Params(server=server.rstrip("/"), ca_cert=ca.encode(), token=token)


def text(header: str, value: str) -> str:
    """A short printable header (the agent's version or image); `Invalid` naming it."""
    if not _TEXT.fullmatch(value):
        raise Invalid(f"{header} must be at most {TEXT_LIMIT} printable characters", header)
    return value


def _bad(what: str) -> Invalid:
    return Invalid(f"{HEADER_PARAMS} {what}", HEADER_PARAMS)
